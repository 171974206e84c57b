package main

import (
	"errors"
	"strings"
	"testing"
)

// --server takes the forms of client.ParseServer (its test has them all);
// what it refuses is a usage error that names the flag and the forms.
func TestServerAddr(t *testing.T) {
	if got, https, err := serverAddr("https://host"); err != nil || got != "host:7070" || !https {
		t.Errorf("serverAddr(https://host) = %q, https %v, %v; want host:7070 over TLS", got, https, err)
	}
	for _, in := range []string{"", "https://", "grpc://host:7070", "host:port", "host:0", "host:70000", "host:7070/path", "a:b:c", "user@host"} {
		_, _, err := serverAddr(in)
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--server") || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("serverAddr(%q): %v, want a configuration error naming --server and the forms accepted", in, err)
		}
	}
}
