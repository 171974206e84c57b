package main

import (
	"errors"
	"strings"
	"testing"
)

// The forms --server takes: a missing port is tern serve's default, a
// scheme is understood (http, https) or refused with the forms accepted,
// and what is not an address says so instead of failing later in gRPC.
func TestServerAddr(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		https    bool
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
		got, https, err := serverAddr(tc.in)
		if err != nil || got != tc.want || https != tc.https {
			t.Errorf("serverAddr(%q) = %q, https %v, %v; want %q, https %v", tc.in, got, https, err, tc.want, tc.https)
		}
	}
	for _, in := range []string{"", "https://", "grpc://host:7070", "host:port", "host:0", "host:70000", "host:7070/path", "a:b:c", "user@host"} {
		_, _, err := serverAddr(in)
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--server") || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("serverAddr(%q): %v, want a configuration error naming --server and the forms accepted", in, err)
		}
	}
}
