package tern

// An installation owns its object-store prefix.
//
// An installation is one metadata store (a bbolt file, or an etcd root) with
// everything it knows: its ID is created once with the metadata
// (meta.Store.Installation). Two installations on one object-store prefix
// would share keys, since log IDs and segment numbers come from the
// metadata: the second would read, seal, compact and delete the first's
// objects. Two things keep them apart:
//
//   - the claim: an object at claimKey, stored with PutIfAbsent by the first
//     client that opens the prefix, names the installation that owns it. A
//     client whose installation is another refuses to open (claimStorage).
//   - the keys: a log created under an installation keeps its objects under
//     <installation ID>/<log ID>/, so even without the claim (deleted by
//     hand, or raced) two installations never share a key. A log created
//     before installations had IDs keeps its old keys, <log ID>/
//     (objectPrefix).
//
// The claim object is JSON, version 1, written once and never changed:
//
//	{"v":1,"installation":"MB3HYQ6N2T5WJQKUXA7VCZ4L2E",
//	 "created":"2026-11-26T05:40:46.123456Z","claimed":"2026-11-26T05:41:00Z",
//	 "metadata":"etcd 127.0.0.1:2379 root \"/tern/\", data directory host:/var/lib/tern"}
//
// installation and created are the owner's meta.Installation; claimed is
// when the claim was stored, and metadata says for a human where the
// owner's metadata was when it claimed the prefix.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/vfs"
)

// claimKey is the key of the claim object, relative to the store's prefix.
const claimKey = blob.ClaimKey

// claimVersion is the version written in, and required of, a claim.
const claimVersion = 1

// claim is the claim object.
type claim struct {
	V            int       `json:"v"`
	Installation string    `json:"installation"`
	Created      time.Time `json:"created"`
	Claimed      time.Time `json:"claimed"`
	Metadata     string    `json:"metadata"`
}

// installation returns the installation of the metadata store, and, with an
// object store, makes sure the store's prefix is this installation's:
// claimed by it now if nobody has claimed it, and refused if another
// installation has.
func installation(ctx context.Context, b blob.Bucket, store meta.Store, opts Options) (meta.Installation, error) {
	in, err := store.Installation(ctx)
	if err != nil {
		return meta.Installation{}, fmt.Errorf("tern: %w", err)
	}
	if b == nil {
		return in, nil
	}
	owner, err := readClaim(ctx, b)
	if errors.Is(err, blob.ErrNotFound) {
		owner, err = putClaim(ctx, b, store, in, opts)
	}
	if errors.Is(err, ErrInvalid) {
		return meta.Installation{}, err // says which store, and what to do
	}
	if err != nil {
		return meta.Installation{}, fmt.Errorf("tern: object store %s: %w", opts.Storage.URL, err)
	}
	if owner.Installation != in.ID {
		return meta.Installation{}, fmt.Errorf("%w: the object store %s belongs to another Tern installation: its %s object names installation %s "+
			"(created %s, metadata %s), and this client's metadata (%s) is installation %s. "+
			"One installation never reads, writes or deletes another's objects: "+
			"give this one another prefix in the storage URL (s3://BUCKET/OTHER-PREFIX?..., dir:///OTHER-DIR), "+
			"or open the metadata that owns the prefix (tern serve --data or --etcd; Options.Dir or Options.Etcd)",
			ErrInvalid, opts.Storage.URL, claimKey, owner.Installation, owner.Created.Format(time.RFC3339), owner.Metadata,
			describeMeta(opts), in.ID)
	}
	return in, nil
}

func readClaim(ctx context.Context, b blob.Bucket) (claim, error) {
	data, err := b.Get(ctx, claimKey)
	if err != nil {
		return claim{}, err
	}
	var c claim
	if err := json.Unmarshal(data, &c); err != nil {
		return claim{}, fmt.Errorf("%s is not a claim of Tern's: %w", claimKey, err)
	}
	if c.V != claimVersion || c.Installation == "" {
		return claim{}, fmt.Errorf("%s is not a claim this version of Tern reads (version %d, installation %q)", claimKey, c.V, c.Installation)
	}
	return c, nil
}

// putClaim claims the prefix for in, unless it holds objects of an
// installation from before installation IDs that this metadata store does
// not know, and returns the claim stored: in's, or that of an installation
// that claimed it first.
func putClaim(ctx context.Context, b blob.Bucket, store meta.Store, in meta.Installation, opts Options) (claim, error) {
	if err := checkUnclaimed(ctx, b, store, opts); err != nil {
		return claim{}, err
	}
	c := claim{V: claimVersion, Installation: in.ID, Created: in.Created, Claimed: time.Now().UTC(), Metadata: describeMeta(opts)}
	data, err := json.Marshal(c)
	if err != nil {
		return claim{}, err
	}
	err = b.PutIfAbsent(ctx, claimKey, data)
	if errors.Is(err, blob.ErrExist) {
		return readClaim(ctx, b) // another client came first: whose is it?
	}
	if err != nil {
		return claim{}, fmt.Errorf("claim the prefix: %w", err)
	}
	opts.Logger.Info("claimed the object store's prefix for this installation", "storage", opts.Storage.URL, "installation", in.ID, "key", claimKey)
	return c, nil
}

// legacyKey matches the keys of the logs created before installations had
// IDs: <log ID>/<segment>/...
var legacyKey = regexp.MustCompile(`^[0-9]+/`)

// checkUnclaimed refuses a prefix that holds objects of logs created before
// installations had IDs unless this metadata store has such logs itself: it
// is then the installation that wrote them, opened for the first time by a
// version that claims its prefix. Else they are another installation's,
// whose keys this one's logs of the same IDs would share.
func checkUnclaimed(ctx context.Context, b blob.Bucket, store meta.Store, opts Options) error {
	logs, err := store.ListLogs(ctx, "")
	if err != nil {
		return fmt.Errorf("list logs: %w", err)
	}
	for _, l := range logs {
		if l.Installation == "" && inObjects(l) {
			return nil
		}
	}
	objs, err := b.List(ctx, "")
	if err != nil {
		return fmt.Errorf("list the objects: %w", err)
	}
	for _, o := range objs {
		if legacyKey.MatchString(o.Key) {
			return fmt.Errorf("%w: the object store %s holds objects of logs that this client's metadata (%s) does not know, "+
				"written by a Tern installation from before installations claimed their prefix (such as %s): "+
				"give this installation another prefix in the storage URL (s3://BUCKET/OTHER-PREFIX?..., dir:///OTHER-DIR), "+
				"or open the metadata that owns them (tern serve --data or --etcd; Options.Dir or Options.Etcd); if they are no one's, delete them",
				ErrInvalid, opts.Storage.URL, describeMeta(opts), o.Key)
		}
	}
	return nil
}

// inObjects reports whether the log is kept in the object store.
func inObjects(l meta.Log) bool {
	var o LogOptions
	return json.Unmarshal(l.Options, &o) == nil && (o.Mode == ModeObject || o.Mode == ModeQuorum)
}

// describeMeta says, for a human, where the metadata of opts is.
func describeMeta(opts Options) string {
	host, _ := os.Hostname()
	dir := cmp.Or(host, "localhost") + ":" + opts.Dir
	if abs, err := filepath.Abs(opts.Dir); err == nil {
		dir = cmp.Or(host, "localhost") + ":" + abs
	}
	if len(opts.Etcd) > 0 {
		return fmt.Sprintf("etcd %s root %q, data directory %s", strings.Join(opts.Etcd, ","), cmp.Or(opts.EtcdRoot, "/tern/"), dir)
	}
	return "bbolt file " + filepath.Join(dir, "meta.db")
}

// objectPrefix is the key prefix of the log's objects: under its
// installation's ID, or, for a log created before installations had IDs,
// under its ID alone.
func objectPrefix(m meta.Log) string {
	if m.Installation == "" {
		return strconv.FormatUint(m.ID, 10) + "/"
	}
	return m.Installation + "/" + strconv.FormatUint(m.ID, 10) + "/"
}

// errForeignMark says that the objects mark of a deleted log names a prefix
// that is not one of the log's in this installation: written by another
// installation (its metadata was replaced under the data directory), or
// damaged, since every mark is synced before its log is marked deleted.
// Deleting under it could delete other logs' objects.
var errForeignMark = errors.New("tern: the objects mark names another prefix")

// deletedObjects returns the object prefix that the objects mark of the
// deleted log id names, and false if the log has no mark (it had no
// objects). A mark written before installations had IDs is empty and names
// the old prefix; one that names neither form of the log's prefix is
// errForeignMark.
func (c *embeddedClient) deletedObjects(id uint64) (string, bool, error) {
	data, err := vfs.ReadFile(c.fs, filepath.Join(c.logDir(id), objectsMark))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("tern: read the objects mark of log %d: %w", id, err)
	}
	prefix := string(data)
	legacy := objectPrefix(meta.Log{ID: id})
	switch {
	case prefix == "":
		return legacy, true, nil
	case prefix == legacy, prefix == objectPrefix(meta.Log{ID: id, Installation: c.install.ID}):
		return prefix, true, nil
	}
	return "", false, fmt.Errorf("%w: %q, not log %d's in installation %s", errForeignMark, prefix, id, c.install.ID)
}

// removeObjects deletes the objects of the deleted log id, those under the
// prefix its objects mark names, if it has one and the client has an object
// store. keep says the log's directory must stay: its mark names a prefix
// that is not the log's.
func (c *embeddedClient) removeObjects(ctx context.Context, id uint64) (keep bool, err error) {
	prefix, ok, err := c.deletedObjects(id)
	switch {
	case errors.Is(err, errForeignMark):
		c.opts.Logger.Warn("keeping a deleted log's directory whose objects are not this installation's; remove it by hand",
			"dir", c.logDir(id), "err", err)
		return true, nil
	case err != nil:
		return false, err
	case !ok || c.bucket == nil:
		return false, nil
	}
	if err := objlog.DeleteAll(ctx, c.bucket, prefix); err != nil {
		return false, fmt.Errorf("tern: delete the objects of log %d: %w", id, err)
	}
	return false, nil
}
