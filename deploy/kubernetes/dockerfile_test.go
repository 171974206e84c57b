package kubernetes

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDockerfile: CI does not build the image (it has no Docker), so what
// the manifests rely on is checked in the Dockerfile's text: its Go is at
// least the go directive of the repository's go.mod, its entrypoint is the
// tern binary (the containers' arguments start with serve), and it runs as
// the user the pods' securityContext names.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goDirective := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`).FindStringSubmatch(string(mod))
	from := regexp.MustCompile(`(?m)^FROM golang:(\d+\.\d+)(\.\d+)? AS build$`).FindStringSubmatch(df)
	switch {
	case goDirective == nil:
		t.Fatal("../../go.mod has no go directive")
	case from == nil:
		t.Errorf("Dockerfile: no \"FROM golang:X.Y.Z AS build\" stage")
	case versionLess(from[1]+from[2], goDirective[1]+goDirective[2]):
		t.Errorf("Dockerfile builds with Go %s; go.mod needs %s", from[1]+from[2], goDirective[1]+goDirective[2])
	}
	for _, want := range []string{
		"CGO_ENABLED=0 go build",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		`ENTRYPOINT ["/usr/local/bin/tern"]`,
		"USER 65532:65532",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile: no %q", want)
		}
	}
	for _, a := range apps(t) {
		for _, s := range a.statefulSets {
			sc := s.Spec.Template.Spec.SecurityContext
			for _, c := range s.Spec.Template.Spec.Containers {
				if c.Image == ternImage && (sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532) {
					t.Errorf("%s: StatefulSet %s: the pod's runAsUser is not the image's user 65532", a.dir, s.Name)
				}
			}
		}
	}
}

// versionLess compares dotted versions such as 1.26.8 and 1.26.0.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
