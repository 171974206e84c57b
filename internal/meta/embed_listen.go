package meta

// Where the embedded etcd listens
//
// The embedded etcd serves its clients and its (never dialled) peer port on
// unix sockets in its data directory, which is kept at mode 0700, with the
// sockets at 0600: only this user (and root) can reach it. etcd has no
// authentication of its own here, and its gRPC API can read and delete
// every key. Its HTTP/JSON gateway (/v3/kv/...) is off; the client socket
// still answers HTTP GETs of /health, /livez, /readyz, /version, /metrics
// and /debug/vars (expvar: the command line and memory statistics).
//
// A socket's path is bounded (sun_path: 107 bytes on Linux, 103 on macOS
// and the BSDs). When the directory's path is too long for its sockets, or
// holds characters that a unix:// endpoint cannot carry ('%', '?', '#'),
// the etcd listens on loopback TCP ports instead, as before sockets, which
// every local user can reach; the start logs a warning that says so.

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

// The names of the sockets in the data directory.
const (
	clientSocket = "client.sock"
	peerSocket   = "peer.sock"
)

// maxSocketPath is the longest path a unix socket can be bound to: the
// size of sockaddr_un's sun_path less its terminating NUL.
func maxSocketPath() int {
	if runtime.GOOS == "linux" {
		return 107
	}
	return 103
}

// etcdURLs are the URLs an embedded etcd listens on and advertises, and the
// client endpoints that reach it.
type etcdURLs struct {
	client, advertiseClient url.URL
	peer, advertisePeer     url.URL
	endpoints               []string
	socket                  bool // the URLs are of unix sockets
}

// socketURLs returns the URLs of the sockets in dir, an absolute path, or
// the reason why they cannot be used.
func socketURLs(dir string) (etcdURLs, error) {
	client, peer := filepath.Join(dir, clientSocket), filepath.Join(dir, peerSocket)
	if n, limit := len(client), maxSocketPath(); n > limit {
		return etcdURLs{}, fmt.Errorf("the socket path %s is %d bytes long, and a unix socket's path is at most %d", client, n, limit)
	}
	// clientv3 hands the endpoint to gRPC, which parses it as a URL.
	endpoint := "unix://" + client
	if u, err := url.Parse(endpoint); err != nil || u.Path != client {
		return etcdURLs{}, fmt.Errorf("the socket path %s cannot be written as a unix:// endpoint", client)
	}
	clientURL := url.URL{Scheme: "unix", Path: client}
	return etcdURLs{
		client:          clientURL,
		advertiseClient: clientURL,
		// etcd binds a peer socket to the URL's host alone (a client
		// socket to its host and path), but a host with a '/' does not
		// survive the URL's String and Parse, which the advertised URL
		// goes through: it is advertised with the path in the path. A
		// single member never dials it.
		peer:          url.URL{Scheme: "unix", Host: peer},
		advertisePeer: url.URL{Scheme: "unix", Path: peer},
		endpoints:     []string{endpoint},
		socket:        true,
	}, nil
}

// portURLs returns the URLs of the given loopback ports.
func portURLs(client, peer int) etcdURLs {
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(client))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peer))}
	return etcdURLs{
		client: clientURL, advertiseClient: clientURL,
		peer: peerURL, advertisePeer: peerURL,
		endpoints: []string{clientURL.Host},
	}
}

// EmbeddedEndpoints returns the client endpoints of the embedded etcd whose
// data directory is dir, as StartEtcdWith made them: its client socket, or
// in the fallback the port its last start saved. It reads, and does not
// check that the etcd runs. It fails if a start on dir would use ports but
// none has yet.
func EmbeddedEndpoints(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("meta: etcd endpoints: %w", err)
	}
	if u, err := socketURLs(abs); err == nil {
		return u.endpoints, nil
	}
	client, peer, err := loadPorts(abs)
	if err != nil {
		return nil, err
	}
	if client == 0 {
		return nil, fmt.Errorf("meta: etcd endpoints: %s holds no %s: start the embedded etcd there first", dir, portsFile)
	}
	return portURLs(client, peer).endpoints, nil
}

// keepPrivate makes dir, which the embedded etcd's sockets are in, mode
// 0700 if it is open to other users, and says so.
func keepPrivate(dir string, logger *slog.Logger) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("meta: start etcd: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("meta: start etcd: the directory %s is open to other users (mode %v) and cannot be made 0700: %w: make it so, or give another directory", dir, perm, err)
		}
		logger.Warn("meta: the etcd directory was open to other users, made it 0700", "dir", dir, "was", perm.String())
	}
	return nil
}

// chmodSockets makes the sockets of u mode 0600: etcd binds them with the
// umask's mode. Until then the directory's 0700 keeps them private.
func chmodSockets(u etcdURLs) error {
	if !u.socket {
		return nil
	}
	for _, path := range []string{u.client.Path, u.advertisePeer.Path} {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("meta: start etcd: make its socket private: %w", err)
		}
	}
	return nil
}

// loadPorts reads the ports file in dir; it returns zeros if there is none.
func loadPorts(dir string) (client, peer int, err error) {
	path := filepath.Join(dir, portsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("meta: start etcd: %w", err)
	}
	_, err = fmt.Sscanf(string(b), "%d %d\n", &client, &peer)
	if err != nil || !validPort(client) || !validPort(peer) {
		return 0, 0, fmt.Errorf("meta: start etcd: %s: want \"<client port> <peer port>\", have %q", path, b)
	}
	return client, peer, nil
}

func validPort(p int) bool { return p > 0 && p < 1<<16 }

// savePorts replaces the ports file in dir.
func savePorts(dir string, client, peer int) error {
	path := filepath.Join(dir, portsFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", client, peer), 0o600); err != nil {
		return fmt.Errorf("meta: start etcd: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("meta: start etcd: %w", err)
	}
	return nil
}

// freePorts returns two loopback ports that were free a moment ago.
func freePorts() (client, peer int, err error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		defer l.Close() // both open at once, so they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// startOnPorts starts etcd with start on loopback ports: those the last
// start on dir saved if they are free, else two free ones. It returns the
// ports to save once etcd serves, zeros if they are the saved ones.
func startOnPorts(dir string, start func(etcdURLs) (*embed.Etcd, error), logger *slog.Logger) (*embed.Etcd, etcdURLs, [2]int, error) {
	client, peer, err := loadPorts(dir)
	if err != nil {
		return nil, etcdURLs{}, [2]int{}, err
	}
	saved := client
	var e *embed.Etcd
	for range startAttempts {
		if client == 0 {
			if client, peer, err = freePorts(); err != nil {
				return nil, etcdURLs{}, [2]int{}, fmt.Errorf("meta: start etcd: %w", err)
			}
		}
		e, err = start(portURLs(client, peer))
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		if client == saved {
			logger.Warn("meta: etcd ports of the last start are taken, taking new ones", "client", client, "peer", peer)
		}
		client, peer = 0, 0 // a port picked as free was taken since
	}
	if err != nil {
		return nil, etcdURLs{}, [2]int{}, fmt.Errorf("meta: start etcd in %s: %w", dir, err)
	}
	var save [2]int
	if client != saved {
		save = [2]int{client, peer}
	}
	return e, portURLs(client, peer), save, nil
}
