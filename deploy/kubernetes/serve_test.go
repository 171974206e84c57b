package kubernetes

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// ternImage is the placeholder image of the tern containers, which
// kustomize's images: replaces (docs/kubernetes.md).
const ternImage = "tern:dev"

// namespace is the namespace docs/kubernetes.md installs into: its
// certificates' names are in it.
const namespace = "tern"

// baseMemory is what a server holds outside --memory-limit's budgets: the
// runtime, gRPC and an embedded etcd take 50-100 MiB (docs/server.md,
// Memory). A container limit closer to --memory-limit than this is an OOM
// kill waiting for a busy day.
const baseMemory = 100 << 20

// printedConfig is the part of tern serve --print-config's YAML the checks
// read.
type printedConfig struct {
	Data             string   `json:"data"`
	Listen           string   `json:"listen"`
	HTTP             string   `json:"http"`
	Etcd             []string `json:"etcd"`
	EtcdDir          string   `json:"etcd_dir"`
	NodeID           string   `json:"node_id"`
	Advertise        string   `json:"advertise"`
	Mode             string   `json:"mode"`
	Storage          string   `json:"storage"`
	StorageAccessKey string   `json:"storage_access_key"`
	SSECKeyFile      string   `json:"storage_ssec_key_file"`
	MemoryLimit      string   `json:"memory_limit"`
	TLSCert          string   `json:"tls_cert"`
	TLSKey           string   `json:"tls_key"`
	TLSClientCA      string   `json:"tls_client_ca"`
	Auth             string   `json:"auth"`
	Insecure         bool     `json:"insecure"`
}

// buildTern builds the tern binary of this repository into a temporary
// directory.
func buildTern(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tern")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tern")
	cmd.Dir = "../.." // the repository's root module
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/tern: %v\n%s", err, out)
	}
	return bin
}

// TestTernAcceptsConfig runs the tern binary of this repository with each
// tern container's arguments and environment, as each pod of its
// StatefulSet gets them, and --print-config: the server must accept the
// configuration, and what it prints must agree with the pod: its ports,
// probes, volumes, Secrets, memory limit, the names its certificate of
// docs/kubernetes.md must cover and, on a node of a cluster, the Services
// of its advertised address and its etcd.
func TestTernAcceptsConfig(t *testing.T) {
	all := apps(t)
	bin := buildTern(t)
	found := 0
	for _, a := range all {
		nodeIDs := map[string]string{}
		var advertised []string
		var tlsPods []pod
		for _, p := range a.pods() {
			for _, c := range p.spec.Containers {
				if c.Image != ternImage {
					if strings.Contains(c.Image, "tern") && !strings.Contains(c.Image, "etcd") {
						t.Errorf("%s: pod %s, container %s: image %s: the manifests name the placeholder %s, which kustomize's images: replaces", a.dir, p.name, c.Name, c.Image, ternImage)
					}
					continue
				}
				found++
				what := fmt.Sprintf("%s: pod %s, container %s", a.dir, p.name, c.Name)
				cfg, ok := printConfig(t, bin, what, p, &c)
				if !ok {
					continue
				}
				checkTernContainer(t, what, a, p, &c, cfg)
				if cfg.TLSCert != "" {
					tlsPods = append(tlsPods, p)
					if host, _, err := net.SplitHostPort(cfg.Advertise); err == nil {
						advertised = append(advertised, host)
					}
				}
				if cfg.NodeID != "" {
					if other, ok := nodeIDs[cfg.NodeID]; ok {
						t.Errorf("%s: node ID %q is pod %s's too", what, cfg.NodeID, other)
					}
					nodeIDs[cfg.NodeID] = p.name
					checkNode(t, what, a, p, &c, cfg)
				}
			}
		}
		checkCertificateNames(t, a, advertised, tlsPods)
	}
	if found == 0 {
		t.Fatalf("no container has the image %s", ternImage)
	}
}

// printConfig runs tern with the container's arguments and environment, as
// Kubernetes would give them to pod p, and --print-config, and parses what
// it prints. A Secret's value is a made-up one: --print-config reads no
// file but the SSE-C key.
func printConfig(t *testing.T, bin, what string, p pod, c *corev1.Container) (printedConfig, bool) {
	t.Helper()
	env := map[string]string{}
	environ := []string{"HOME=" + t.TempDir()} // nothing of the test's own $TERN_*
	for _, e := range c.Env {
		v := expand(e.Value, env)
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				v = p.name
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = namespace
			case f.SecretKeyRef != nil:
				v = secretValue(f.SecretKeyRef.Name, f.SecretKeyRef.Key)
			default:
				t.Errorf("%s: env %s: the test does not know its source: teach it", what, e.Name)
				return printedConfig{}, false
			}
		}
		env[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	if len(c.Command) > 0 {
		t.Errorf("%s: sets command %v: the image's entrypoint is the tern binary, and the arguments start with serve", what, c.Command)
	}
	var args []string
	for _, arg := range c.Args {
		args = append(args, expand(arg, env))
	}
	if len(args) == 0 || args[0] != "serve" {
		t.Errorf("%s: arguments %v do not start with serve", what, args)
		return printedConfig{}, false
	}
	cmd := exec.Command(bin, append(args, "--print-config")...)
	cmd.Env = environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: tern %s --print-config: %v\n%s", what, strings.Join(args, " "), err, stderr.String())
		return printedConfig{}, false
	}
	var cfg printedConfig
	if err := yaml.Unmarshal(stdout.Bytes(), &cfg); err != nil {
		t.Errorf("%s: --print-config printed what is not its YAML: %v\n%s", what, err, stdout.String())
		return printedConfig{}, false
	}
	if env["TERN_STORAGE_SECRET_KEY"] != "" && !strings.Contains(stdout.String(), "# storage_secret_key is set") {
		t.Errorf("%s: $TERN_STORAGE_SECRET_KEY is set, and the server did not take it:\n%s", what, stdout.String())
	}
	if k := env["TERN_STORAGE_ACCESS_KEY"]; k != "" && cfg.StorageAccessKey != k {
		t.Errorf("%s: $TERN_STORAGE_ACCESS_KEY is %q, and the server took %q", what, k, cfg.StorageAccessKey)
	}
	return cfg, true
}

func secretValue(name, key string) string { return "secret-" + name + "-" + key }

// checkTernContainer checks what any tern container needs.
func checkTernContainer(t *testing.T, what string, a *app, p pod, c *corev1.Container, cfg printedConfig) {
	t.Helper()
	listenHost, listenPort := splitPort(t, what, "listen", cfg.Listen)
	httpHost, httpPort := splitPort(t, what, "http", cfg.HTTP)
	if _, ok := portNamed(c, listenPort); !ok {
		t.Errorf("%s: the gRPC port %d (--listen) is not a port the container declares", what, listenPort)
	}
	if _, ok := portNamed(c, httpPort); !ok {
		t.Errorf("%s: the HTTP port %d (--http) is not a port the container declares", what, httpPort)
	}

	scheme := corev1.URISchemeHTTP
	if cfg.TLSCert != "" {
		scheme = corev1.URISchemeHTTPS // the HTTP listener serves TLS with the same certificate
	}
	for _, pr := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		g := pr.probe
		if g == nil || g.HTTPGet == nil {
			t.Errorf("%s: no %s probe on %s", what, pr.kind, pr.path)
			continue
		}
		port, _ := portOf(c, g.HTTPGet.Port)
		s := g.HTTPGet.Scheme
		if s == "" {
			s = corev1.URISchemeHTTP
		}
		switch {
		case g.HTTPGet.Path != pr.path:
			t.Errorf("%s: the %s probe gets %s; want %s (docs/server.md)", what, pr.kind, g.HTTPGet.Path, pr.path)
		case int(port) != httpPort:
			t.Errorf("%s: the %s probe goes to port %d; the server's HTTP is on %d (--http)", what, pr.kind, port, httpPort)
		case s != scheme:
			t.Errorf("%s: the %s probe speaks %s; the server's HTTP listener speaks %s", what, pr.kind, s, scheme)
		}
	}
	if p.spec.TerminationGracePeriodSeconds == nil || *p.spec.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("%s: terminationGracePeriodSeconds must be over the 30 s a graceful shutdown may take (docs/server.md)", what)
	}

	for _, host := range []string{listenHost, httpHost} {
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && (cfg.TLSCert == "" || cfg.Auth == "") {
			t.Errorf("%s: listens beyond loopback (%s) without TLS and --auth: the server would refuse to start", what, host)
		}
	}
	if cfg.Insecure {
		t.Errorf("%s: --insecure: anyone who reaches the server could read and delete every log", what)
	}

	for _, f := range []struct{ setting, file string }{
		{"tls_cert", cfg.TLSCert}, {"tls_key", cfg.TLSKey}, {"tls_client_ca", cfg.TLSClientCA},
		{"auth", cfg.Auth}, {"storage_ssec_key_file", cfg.SSECKeyFile},
	} {
		if f.file != "" {
			checkSecretFile(t, what, p, c, f.setting, f.file)
		}
	}
	for _, d := range []struct{ setting, dir string }{{"data", cfg.Data}, {"etcd_dir", cfg.EtcdDir}} {
		if d.dir != "" {
			if claim := claimOf(p.set, c, d.dir); claim == "" {
				t.Errorf("%s: %s %s is on no volume of a volumeClaimTemplate: it would not outlive the pod", what, d.setting, d.dir)
			}
		}
	}

	limit := c.Resources.Limits.Memory()
	if cfg.MemoryLimit == "" {
		t.Errorf("%s: no --memory-limit: the server would take a quarter of the container's limit, and leave the rest unused", what)
	} else if n, err := parseSize(cfg.MemoryLimit); err != nil {
		t.Errorf("%s: memory_limit %q: %v", what, cfg.MemoryLimit, err)
	} else if limit.Value() < n+baseMemory {
		t.Errorf("%s: the container's memory limit %s leaves less than %s above --memory-limit %s for the runtime and what is outside Go's heap (docs/server.md, Memory)",
			what, limit, resource.NewQuantity(baseMemory, resource.BinarySI), cfg.MemoryLimit)
	}
}

// checkNode checks a node of a cluster: its advertised address is a
// Service of its own, and its etcd is in the manifests.
func checkNode(t *testing.T, what string, a *app, p pod, c *corev1.Container, cfg printedConfig) {
	t.Helper()
	_, listenPort := splitPort(t, what, "listen", cfg.Listen)
	host, port := splitPort(t, what, "advertise", cfg.Advertise)
	name, rest, _ := strings.Cut(host, ".")
	if rest != namespace+".svc" && rest != namespace+".svc.cluster.local" && rest != "" {
		t.Errorf("%s: advertises %s: want the Service of the node's name in namespace %s", what, host, namespace)
	}
	svc := a.service(name)
	if svc == nil {
		t.Errorf("%s: advertises %s, and %s has no Service %s", what, cfg.Advertise, a.dir, name)
		return
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	if !sel.Matches(labels.Set(p.labels)) {
		t.Errorf("%s: advertises Service %s, which does not select this pod", what, name)
	}
	for _, other := range a.pods() {
		if other.name != p.name && sel.Matches(labels.Set(other.labels)) {
			t.Errorf("%s: advertises Service %s, which selects pod %s too", what, name, other.name)
		}
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("%s: Service %s routes only to a ready pod: a node must be reachable before it is ready, and an unready node's address would refuse connections as a dead one's does (set publishNotReadyAddresses)", what, name)
	}
	reached := false
	for _, sp := range svc.Spec.Ports {
		if sp.Port == int32(port) {
			target, _ := portOf(c, sp.TargetPort)
			reached = target == int32(listenPort)
		}
	}
	if !reached {
		t.Errorf("%s: Service %s does not take port %d to the gRPC port %d", what, name, port, listenPort)
	}

	for _, ep := range cfg.Etcd {
		host, port := splitPort(t, what, "etcd", ep)
		member, svcName, _ := strings.Cut(host, ".")
		var set *appsv1.StatefulSet
		for _, m := range a.pods() {
			if m.name == member && m.set.Spec.ServiceName == svcName {
				set = m.set
				if _, ok := containerPort(m.spec, intstr.FromInt32(int32(port))); !ok {
					t.Errorf("%s: etcd endpoint %s: pod %s declares no port %d", what, ep, member, port)
				}
			}
		}
		if set == nil {
			t.Errorf("%s: etcd endpoint %s is no pod of a StatefulSet of %s (pod.service:port)", what, ep, a.dir)
			continue
		}
		if s := a.service(svcName); s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: etcd endpoint %s: Service %s must be headless, for its pods to have names", what, ep, svcName)
		}
	}
}

// checkSecretFile checks that file is a key of a Secret the container
// mounts read-only.
func checkSecretFile(t *testing.T, what string, p pod, c *corev1.Container, setting, file string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range p.spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret == nil {
				t.Errorf("%s: %s %s is on volume %s, which is not a Secret", what, setting, file, v.Name)
				return
			}
			key := rel
			for _, item := range v.Secret.Items {
				if item.Path == rel {
					key = item.Key
				}
			}
			if path.Dir(key) != "." {
				t.Errorf("%s: %s %s: key %s is not a Secret's key", what, setting, file, key)
				return
			}
			keys, ok := documentedSecrets(t)[v.Secret.SecretName]
			if ok && !slices.Contains(keys, key) {
				t.Errorf("%s: %s %s is key %s of Secret %s; docs/kubernetes.md makes that Secret with keys %v", what, setting, file, key, v.Secret.SecretName, keys)
			}
			return
		}
	}
	t.Errorf("%s: %s %s is on no volume the container mounts", what, setting, file)
}

// claimOf is the volumeClaimTemplate whose volume holds dir in c, or "".
func claimOf(s *appsv1.StatefulSet, c *corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if dir != mp && !strings.HasPrefix(dir, mp+"/") {
			continue
		}
		for _, ct := range s.Spec.VolumeClaimTemplates {
			if ct.Name == m.Name {
				return ct.Name
			}
		}
	}
	return ""
}

func splitPort(t *testing.T, what, setting, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(port)
	if err != nil || err2 != nil {
		t.Errorf("%s: %s %q is not host:port", what, setting, addr)
	}
	return host, n
}

func portNamed(c *corev1.Container, port int) (string, bool) {
	for _, p := range c.Ports {
		if p.ContainerPort == int32(port) {
			return p.Name, true
		}
	}
	return "", false
}

// parseSize parses a size as tern writes it: a whole number and an optional
// unit, B, KiB, MiB, GiB, TiB, KB, MB, GB or TB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
