package kubernetes

import (
	"crypto/x509"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// sanList matches the subjectAltName of an openssl command.
var sanList = regexp.MustCompile(`subjectAltName=([^'\\\s]+)`)

// documentedCertificates are the certificates docs/kubernetes.md makes,
// each as the subject alternative names it gives.
func documentedCertificates(t *testing.T) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatalf("read the Kubernetes docs: %v", err)
	}
	var certs []*x509.Certificate
	for _, m := range sanList.FindAllStringSubmatch(string(b), -1) {
		c := &x509.Certificate{}
		for san := range strings.SplitSeq(m[1], ",") {
			switch kind, v, _ := strings.Cut(san, ":"); kind {
			case "DNS":
				c.DNSNames = append(c.DNSNames, v)
			case "IP":
				c.IPAddresses = append(c.IPAddresses, net.ParseIP(v))
			default:
				t.Errorf("docs/kubernetes.md: subjectAltName %s: the test knows DNS: and IP: only", san)
			}
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatal("docs/kubernetes.md makes no certificate (no subjectAltName=)")
	}
	return certs
}

// checkCertificateNames checks that one certificate of docs/kubernetes.md
// is valid for every name the clients and nodes of app a dial: advertised,
// and that of each Service in front of pods that serve TLS.
func checkCertificateNames(t *testing.T, a *app, advertised []string, tlsPods []pod) {
	t.Helper()
	names := slices.Clone(advertised)
	for _, svc := range a.services {
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, p := range tlsPods {
			if sel.Matches(labels.Set(p.labels)) {
				names = append(names, svc.Name+"."+namespace+".svc")
				break
			}
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, c := range documentedCertificates(t) {
		ok := true
		for _, n := range names {
			ok = ok && c.VerifyHostname(n) == nil
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: no certificate that docs/kubernetes.md makes is valid for all of %v: a client or a node would refuse it", a.dir, names)
}
