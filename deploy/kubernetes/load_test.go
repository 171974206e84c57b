package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// scheme knows the kinds the manifests may use; a document of any other
// kind fails to decode, so that a misspelt kind, or one no check below
// looks at, fails the test rather than being passed over.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// decoder decodes YAML as the API server does, and strictly: an unknown
// field, a field given twice, or a field in the wrong case is an error.
var decoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// kustomization is the part of kustomize's Kustomization the manifests use.
// It is decoded strictly too: a field the test does not know fails, so that
// it is added here, and checked, before it is used.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

const kustomizationAPIVersion = "kustomize.config.k8s.io/v1beta1"

// object is one document of a manifest file, decoded.
type object struct {
	file string // relative to deploy/kubernetes
	doc  int    // its place in the file, from 1
	obj  any    // a pointer to an API type, or *kustomization
}

func (o object) String() string { return fmt.Sprintf("%s (document %d)", o.file, o.doc) }

// decodeDocument decodes one YAML document into the type its apiVersion and
// kind name.
func decodeDocument(doc []byte) (any, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	gvk, err := kjson.DefaultMetaFactory.Interpret(j)
	if err != nil {
		return nil, err
	}
	if gvk.Kind == "Kustomization" && gvk.GroupVersion().String() == kustomizationAPIVersion {
		var k kustomization
		strict, err := sigsjson.UnmarshalStrict(j, &k)
		if err = errors.Join(append(strict, err)...); err != nil {
			return nil, err
		}
		return &k, nil
	}
	obj, _, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		return nil, err // a strict decoding error is an error
	}
	return obj, nil
}

// splitDocuments splits a YAML stream at its "---" lines, leaving out the
// documents that hold only comments and blank lines.
func splitDocuments(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if !onlyComments(doc) {
			docs = append(docs, doc)
		}
	}
}

func onlyComments(doc []byte) bool {
	for line := range strings.Lines(string(doc)) {
		if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// loadAll decodes every *.yaml under deploy/kubernetes, once per test
// binary.
var loadAll = sync.OnceValues(func() ([]object, error) {
	var objs []object
	var errs []error
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".yml") {
			errs = append(errs, fmt.Errorf("%s: name it .yaml, as the other manifests (and this test) expect", path))
		}
		if d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs, err := splitDocuments(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			return nil
		}
		if len(docs) == 0 {
			errs = append(errs, fmt.Errorf("%s: no document", path))
		}
		for i, doc := range docs {
			o := object{file: path, doc: i + 1}
			if o.obj, err = decodeDocument(doc); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", o, err))
				continue
			}
			objs = append(objs, o)
		}
		return nil
	})
	return objs, errors.Join(append(errs, err)...)
})

// app is what one directory of manifests (standalone/, cluster/) applies:
// each is applied on its own, so each must hold together on its own.
type app struct {
	dir           string
	objs          []object
	kustomization *kustomization
	statefulSets  []*appsv1.StatefulSet
	services      []*corev1.Service
	pdbs          []*policyv1.PodDisruptionBudget
	netpols       []*networkingv1.NetworkPolicy
}

// pod is a pod a StatefulSet makes: its template, under its name and with
// the labels the StatefulSet controller adds.
type pod struct {
	name   string
	labels map[string]string
	spec   *corev1.PodSpec
	set    *appsv1.StatefulSet
}

func (a *app) pods() []pod {
	var pods []pod
	for _, s := range a.statefulSets {
		n := int32(1)
		if s.Spec.Replicas != nil {
			n = *s.Spec.Replicas
		}
		for i := range n {
			name := fmt.Sprintf("%s-%d", s.Name, i)
			labels := map[string]string{
				"statefulset.kubernetes.io/pod-name": name,
				"apps.kubernetes.io/pod-index":       fmt.Sprint(i),
			}
			for k, v := range s.Spec.Template.Labels {
				labels[k] = v
			}
			pods = append(pods, pod{name: name, labels: labels, spec: &s.Spec.Template.Spec, set: s})
		}
	}
	return pods
}

func (a *app) service(name string) *corev1.Service {
	for _, s := range a.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// apps loads the manifests and groups them by directory. Any failure to
// load or decode fails t.
func apps(t *testing.T) []*app {
	t.Helper()
	objs, err := loadAll()
	if err != nil {
		t.Fatalf("the manifests do not decode strictly:\n%v", err)
	}
	byDir := map[string]*app{}
	var out []*app
	for _, o := range objs {
		dir := filepath.Dir(o.file)
		a := byDir[dir]
		if a == nil {
			a = &app{dir: dir}
			byDir[dir] = a
			out = append(out, a)
		}
		a.objs = append(a.objs, o)
		switch v := o.obj.(type) {
		case *kustomization:
			if filepath.Base(o.file) != "kustomization.yaml" || a.kustomization != nil {
				t.Errorf("%s: a Kustomization belongs in a directory's one kustomization.yaml", o)
			}
			a.kustomization = v
		case *appsv1.StatefulSet:
			a.statefulSets = append(a.statefulSets, v)
		case *corev1.Service:
			a.services = append(a.services, v)
		case *policyv1.PodDisruptionBudget:
			a.pdbs = append(a.pdbs, v)
		case *networkingv1.NetworkPolicy:
			a.netpols = append(a.netpols, v)
		default:
			t.Errorf("%s: the test does not check a %T: check it here before using it", o, v)
		}
	}
	slices.SortFunc(out, func(x, y *app) int { return strings.Compare(x.dir, y.dir) })
	if len(out) < 2 {
		t.Fatalf("found manifests in %d directories; want standalone/ and cluster/ at least", len(out))
	}
	return out
}
