package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ternwal/tern/client"
)

// The forms of a server address: a missing port is tern serve's default, a
// scheme is understood (http, https) or refused with the forms accepted,
// and what is not an address says so instead of failing later in gRPC.
func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		tls      bool
	}{
		{"127.0.0.1:7071", "127.0.0.1:7071", false},
		{"127.0.0.1", "127.0.0.1:7070", false},
		{" localhost ", "localhost:7070", false},
		{":7072", "127.0.0.1:7072", false},
		{"http://host:7073", "host:7073", false},
		{"http://host", "host:7070", false},
		{"https://host", "host:7070", true},
		{"HTTPS://host:9/", "host:9", true},
		{"[::1]:7074", "[::1]:7074", false},
		{"[::1]", "[::1]:7070", false},
		{"::1", "[::1]:7070", false},
	} {
		got, tls, err := client.ParseServer(tc.in)
		if err != nil || got != tc.want || tls != tc.tls {
			t.Errorf("ParseServer(%q) = %q, tls %v, %v; want %q, tls %v", tc.in, got, tls, err, tc.want, tc.tls)
		}
	}
	for _, in := range []string{"", "https://", "grpc://host:7070", "host:port", "host:0", "host:70000", "host:7070/path", "a:b:c", "user@host"} {
		_, _, err := client.ParseServer(in)
		if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("ParseServer(%q): %v, want ErrInvalid showing the forms accepted", in, err)
		}
	}
}
