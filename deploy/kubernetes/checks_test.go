package kubernetes

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDecodeIsStrict proves that the decoding the other tests rely on
// refuses what kubectl apply would refuse or silently drop.
func TestDecodeIsStrict(t *testing.T) {
	const head = "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n"
	for _, tc := range []struct{ name, doc string }{
		{"unknown field", head + "spec:\n  selectr: {a: b}\n"},
		{"field in the wrong case", head + "spec:\n  clusterip: None\n"},
		{"duplicate field", head + "spec:\n  clusterIP: None\n  clusterIP: None\n"},
		{"unknown kind", "apiVersion: v1\nkind: Servise\nmetadata:\n  name: x\n"},
		{"unknown version", "apiVersion: apps/v1beta3\nkind: StatefulSet\nmetadata:\n  name: x\n"},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: x\n"},
		{"a value of the wrong type", head + "spec:\n  ports: [{port: seventy}]\n"},
		{"unknown kustomization field", "apiVersion: " + kustomizationAPIVersion + "\nkind: Kustomization\nresource: [a.yaml]\n"},
	} {
		if _, err := decodeDocument([]byte(tc.doc)); err == nil {
			t.Errorf("%s: decoded without an error:\n%s", tc.name, tc.doc)
		}
	}
	if _, err := decodeDocument([]byte(head + "spec:\n  clusterIP: None\n")); err != nil {
		t.Errorf("a valid Service: %v", err)
	}
}

// TestManifestsDecodeStrictly: every document of every manifest is a known
// kind, decoded strictly (apps reports what fails).
func TestManifestsDecodeStrictly(t *testing.T) {
	n := 0
	for _, a := range apps(t) {
		n += len(a.objs)
	}
	t.Logf("%d documents decoded", n)
}

// TestKustomizations: each directory is applied with kubectl apply -k, so
// its kustomization.yaml must list every manifest in it, and only those.
func TestKustomizations(t *testing.T) {
	for _, a := range apps(t) {
		if a.kustomization == nil {
			t.Errorf("%s: no kustomization.yaml: kubectl apply -k %s would not work", a.dir, a.dir)
			continue
		}
		var files []string
		for _, o := range a.objs {
			if f := filepath.Base(o.file); f != "kustomization.yaml" && !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		slices.Sort(files)
		listed := slices.Sorted(slices.Values(a.kustomization.Resources))
		if !slices.Equal(files, listed) {
			t.Errorf("%s/kustomization.yaml lists resources %v; the directory holds %v", a.dir, listed, files)
		}
	}
}

// TestSelectors: every Service, PodDisruptionBudget and NetworkPolicy
// selects pods that the manifests make, each Service's ports reach a port
// those pods declare, and each pod is covered by exactly one budget (the
// eviction API refuses to evict a pod that two budgets cover).
func TestSelectors(t *testing.T) {
	for _, a := range apps(t) {
		pods := a.pods()
		selected := func(sel labels.Selector) []pod {
			var out []pod
			for _, p := range pods {
				if sel.Matches(labels.Set(p.labels)) {
					out = append(out, p)
				}
			}
			return out
		}
		labelSelector := func(what string, ls *metav1.LabelSelector) []pod {
			sel, err := metav1.LabelSelectorAsSelector(ls)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				return nil
			}
			if sel.Empty() {
				t.Errorf("%s: an empty selector selects every pod in the namespace", what)
			}
			return selected(sel)
		}
		for _, s := range a.statefulSets {
			what := a.dir + ": StatefulSet " + s.Name
			sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
				t.Errorf("%s: its selector does not match its pod template's labels (%v)", what, err)
			}
			if svc := a.service(s.Spec.ServiceName); svc == nil {
				t.Errorf("%s: serviceName %q is no Service of %s", what, s.Spec.ServiceName, a.dir)
			}
			for _, other := range a.statefulSets {
				if other != s && sel.Matches(labels.Set(other.Spec.Template.Labels)) {
					t.Errorf("%s: its selector matches the pods of StatefulSet %s too", what, other.Name)
				}
			}
		}
		for _, svc := range a.services {
			what := a.dir + ": Service " + svc.Name
			if len(svc.Spec.Selector) == 0 {
				t.Errorf("%s: no selector", what)
				continue
			}
			ps := selected(labels.SelectorFromSet(svc.Spec.Selector))
			if len(ps) == 0 {
				t.Errorf("%s: its selector %v matches no pod of %s", what, svc.Spec.Selector, a.dir)
			}
			for _, port := range svc.Spec.Ports {
				for _, p := range ps {
					if _, ok := containerPort(p.spec, port.TargetPort); !ok {
						t.Errorf("%s: port %s targets %s, which pod %s does not declare", what, port.Name, port.TargetPort.String(), p.name)
					}
				}
			}
		}
		covered := map[string][]string{}
		for _, pdb := range a.pdbs {
			what := a.dir + ": PodDisruptionBudget " + pdb.Name
			ps := labelSelector(what, pdb.Spec.Selector)
			if len(ps) == 0 {
				t.Errorf("%s: its selector matches no pod of %s", what, a.dir)
			}
			for _, p := range ps {
				covered[p.name] = append(covered[p.name], pdb.Name)
			}
		}
		for _, p := range pods {
			if n := len(covered[p.name]); n != 1 {
				t.Errorf("%s: pod %s is covered by %d PodDisruptionBudgets %v; want one", a.dir, p.name, n, covered[p.name])
			}
		}
		for _, np := range a.netpols {
			what := a.dir + ": NetworkPolicy " + np.Name
			ps := labelSelector(what, &np.Spec.PodSelector)
			if len(ps) == 0 {
				t.Errorf("%s: its podSelector matches no pod of %s", what, a.dir)
			}
			for _, rule := range np.Spec.Ingress {
				for _, peer := range rule.From {
					if peer.PodSelector != nil && peer.NamespaceSelector == nil && len(labelSelector(what+" ingress from", peer.PodSelector)) == 0 {
						t.Errorf("%s: an ingress rule admits pods %v, and %s makes none", what, peer.PodSelector.MatchLabels, a.dir)
					}
				}
				for _, port := range rule.Ports {
					for _, p := range ps {
						if port.Port != nil {
							if _, ok := containerPort(p.spec, *port.Port); !ok {
								t.Errorf("%s: port %s is not declared by pod %s", what, port.Port.String(), p.name)
							}
						}
					}
				}
			}
		}
	}
}

// containerPort resolves a port, by name or number, among the ports the
// pod's containers declare.
func containerPort(spec *corev1.PodSpec, port intstr.IntOrString) (int32, bool) {
	for _, c := range spec.Containers {
		if p, ok := portOf(&c, port); ok {
			return p, true
		}
	}
	return 0, false
}

func portOf(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// TestContainers checks each container on its own: its probes reach a port
// it declares, it has a memory limit at least its request, the restricted
// Pod Security Standard holds (what a namespace that enforces it admits),
// its volumes exist, and every $(VAR) in its command, arguments and
// environment names a variable defined before it.
func TestContainers(t *testing.T) {
	for _, a := range apps(t) {
		for _, s := range a.statefulSets {
			spec := &s.Spec.Template.Spec
			volumes := map[string]*corev1.Volume{}
			for i, v := range spec.Volumes {
				volumes[v.Name] = &spec.Volumes[i]
			}
			claims := map[string]bool{}
			for _, c := range s.Spec.VolumeClaimTemplates {
				claims[c.Name] = true
			}
			psc := spec.SecurityContext
			for _, c := range spec.Containers {
				what := a.dir + ": StatefulSet " + s.Name + ", container " + c.Name
				for _, pr := range []struct {
					kind  string
					probe *corev1.Probe
				}{{"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}, {"startup", c.StartupProbe}} {
					if pr.probe == nil {
						if pr.kind != "startup" {
							t.Errorf("%s: no %s probe", what, pr.kind)
						}
						continue
					}
					if g := pr.probe.HTTPGet; g == nil {
						t.Errorf("%s: its %s probe is not an HTTP GET", what, pr.kind)
					} else if _, ok := portOf(&c, g.Port); !ok {
						t.Errorf("%s: its %s probe's port %s is not a port it declares", what, pr.kind, g.Port.String())
					}
				}

				limit, request := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
				switch {
				case limit.IsZero():
					t.Errorf("%s: no memory limit", what)
				case request.IsZero():
					t.Errorf("%s: no memory request", what)
				case request.Cmp(*limit) > 0:
					t.Errorf("%s: its memory request %s is over its limit %s", what, request, limit)
				}
				if c.Resources.Requests.Cpu().IsZero() {
					t.Errorf("%s: no CPU request", what)
				}

				csc := c.SecurityContext
				if csc == nil {
					t.Errorf("%s: no securityContext", what)
					continue
				}
				nonRoot := (csc.RunAsNonRoot != nil && *csc.RunAsNonRoot) || (csc.RunAsNonRoot == nil && psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
				seccomp := csc.SeccompProfile
				if seccomp == nil && psc != nil {
					seccomp = psc.SeccompProfile
				}
				switch {
				case !nonRoot:
					t.Errorf("%s: runAsNonRoot is not true", what)
				case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
					t.Errorf("%s: seccompProfile is not RuntimeDefault", what)
				case csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
					t.Errorf("%s: allowPrivilegeEscalation is not false", what)
				case csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0:
					t.Errorf("%s: capabilities do not drop ALL and add none", what)
				case csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
					t.Errorf("%s: readOnlyRootFilesystem is not true", what)
				}

				for _, m := range c.VolumeMounts {
					v, ok := volumes[m.Name]
					switch {
					case !ok && !claims[m.Name]:
						t.Errorf("%s: mounts %s, which is no volume or volumeClaimTemplate", what, m.Name)
					case ok && v.Secret != nil && !m.ReadOnly:
						t.Errorf("%s: mounts Secret %s writable", what, v.Secret.SecretName)
					case ok && v.Secret != nil && m.SubPath != "":
						t.Errorf("%s: mounts Secret %s with subPath, which the kubelet never updates: a renewed certificate would not reach the server", what, v.Secret.SecretName)
					}
				}

				defined := map[string]bool{}
				for _, e := range c.Env {
					for _, ref := range varRefs(e.Value) {
						if !defined[ref] {
							t.Errorf("%s: env %s uses $(%s), which is not defined before it", what, e.Name, ref)
						}
					}
					defined[e.Name] = true
				}
				for _, arg := range slices.Concat(c.Command, c.Args) {
					for _, ref := range varRefs(arg) {
						if !defined[ref] {
							t.Errorf("%s: %q uses $(%s), which its env does not define: Kubernetes would pass it on as it is", what, arg, ref)
						}
					}
				}
			}
		}
	}
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// varRefs are the variables s names as $(VAR); $$ escapes a $.
func varRefs(s string) []string {
	var refs []string
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		if m[1] != "" {
			refs = append(refs, m[1])
		}
	}
	return refs
}

// expand replaces $(VAR) in s as Kubernetes does: a defined variable by its
// value, $$ by $, and anything else is left as it is.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// TestSecretsAreDocumented: the manifests hold no Secret (a committed one
// would be everybody's), so every Secret they use, and each of its keys
// they read, must be made by a "kubectl create secret" command in
// docs/kubernetes.md.
func TestSecretsAreDocumented(t *testing.T) {
	documented := documentedSecrets(t)
	for _, a := range apps(t) {
		for _, s := range a.statefulSets {
			spec := &s.Spec.Template.Spec
			use := func(what, name, key string) {
				keys, ok := documented[name]
				switch {
				case !ok:
					t.Errorf("%s: StatefulSet %s uses Secret %s, which no \"kubectl create secret\" in docs/kubernetes.md makes", a.dir, s.Name, name)
				case key != "" && !slices.Contains(keys, key):
					t.Errorf("%s: StatefulSet %s reads key %s of Secret %s (%s); docs/kubernetes.md makes it with keys %v", a.dir, s.Name, key, name, what, keys)
				}
			}
			for _, v := range spec.Volumes {
				if v.Secret == nil {
					continue
				}
				use("volume "+v.Name, v.Secret.SecretName, "")
				for _, item := range v.Secret.Items {
					use("volume "+v.Name, v.Secret.SecretName, item.Key)
				}
			}
			for _, c := range spec.Containers {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						use("env "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
					}
				}
				for _, e := range c.EnvFrom {
					if e.SecretRef != nil {
						use("envFrom", e.SecretRef.Name, "")
					}
				}
			}
		}
	}
}

// documentedSecrets reads the "kubectl create secret" commands of
// docs/kubernetes.md: each Secret's name and the keys it gets.
func documentedSecrets(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatalf("read the Kubernetes docs: %v", err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	secrets := map[string][]string{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		i := slices.Index(f, "secret")
		if i < 1 || f[i-1] != "create" || len(f) < i+3 {
			continue
		}
		kind, name := f[i+1], f[i+2]
		var keys []string
		for _, arg := range f[i+3:] {
			flag, val, _ := strings.Cut(arg, "=")
			switch {
			case kind == "tls" && flag == "--cert":
				keys = append(keys, "tls.crt")
			case kind == "tls" && flag == "--key":
				keys = append(keys, "tls.key")
			case kind == "generic" && flag == "--from-file":
				key, _, ok := strings.Cut(val, "=")
				if !ok {
					key = filepath.Base(val) // --from-file=PATH: the file's name
				}
				keys = append(keys, key)
			case kind == "generic" && flag == "--from-literal":
				key, _, _ := strings.Cut(val, "=")
				keys = append(keys, key)
			case strings.HasPrefix(arg, "--from-env-file"):
				t.Errorf("docs/kubernetes.md: %q: this test cannot tell the keys of --from-env-file; use --from-file or --from-literal", strings.TrimSpace(line))
			}
		}
		if prev, ok := secrets[name]; ok && !slices.Equal(prev, keys) {
			t.Errorf("docs/kubernetes.md makes Secret %s twice, with keys %v and %v", name, prev, keys)
		}
		secrets[name] = keys
	}
	if len(secrets) == 0 {
		t.Fatal("docs/kubernetes.md has no \"kubectl create secret\" command")
	}
	return secrets
}
