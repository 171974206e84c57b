package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern/client/rpcerr"
)

// defaultEtcdRequestTimeout bounds each call of the store on etcd, retries
// of a compare-and-swap included, unless EtcdOptions.RequestTimeout is set.
// etcd's client waits for a connection as long as its context lets it, so
// without a bound a call on an etcd that is down would hang.
const defaultEtcdRequestTimeout = 10 * time.Second

// errNoAnswer is the cause of the context of a call that ran out of the
// store's own time (RequestTimeout), as opposed to the caller's.
var errNoAnswer = errors.New("meta: etcd did not answer in time")

// bound returns ctx bounded by the store's request timeout, for one call of
// the store; classify tells its expiry from the caller's.
func (e *Etcd) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, e.timeout, errNoAnswer)
}

// classify turns what etcd's client returned for a call made with ctx (from
// bound) into Tern's errors, so that every call of the store fails the same
// way for the same reason:
//
//   - the database over its quota (the NOSPACE alarm) is rpcerr.ErrNoSpace,
//     which the server answers as RESOURCE_EXHAUSTED;
//   - no answer within the store's request timeout, an unreachable or
//     stopped etcd, no leader, a timeout inside etcd, too many requests and
//     the CORRUPT alarm are rpcerr.ErrUnavailable (UNAVAILABLE): the call
//     may succeed later, or after an operator's repair;
//   - the caller's own cancellation or deadline, and every other error
//     (ErrNotFound, a lost lease, ...), are returned as they are.
//
// The etcd error is kept as text only: a gRPC status in the chain would
// travel to the client as it is, under etcd's code.
func (e *Etcd) classify(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, rpcerr.ErrUnavailable) || errors.Is(err, rpcerr.ErrNoSpace) {
		return err
	}
	endpoints := strings.Join(e.endpoints, ",")
	if ctx != nil && errors.Is(context.Cause(ctx), errNoAnswer) {
		return fmt.Errorf("%w: etcd at %s did not answer within %s: is it running and reachable? (%v)", rpcerr.ErrUnavailable, endpoints, e.timeout, err)
	}
	if ctx != nil && ctx.Err() != nil {
		return err // the caller's
	}
	switch classOf(err) {
	case classNoSpace:
		return fmt.Errorf("%w: etcd's database at %s is over its quota (alarm NOSPACE), and etcd takes no writes until space is freed: "+
			"compact and defragment it, then disarm the alarm (etcdctl alarm disarm), or raise its quota (tern serve --etcd-quota for the embedded etcd); docs/server.md, \"Keeping etcd healthy\" (%v)",
			rpcerr.ErrNoSpace, endpoints, err)
	case classCorrupt:
		return fmt.Errorf("%w: etcd at %s reports its data corrupt (alarm CORRUPT) and takes no writes: restore the member from a snapshot; docs/server.md, \"Keeping etcd healthy\" (%v)",
			rpcerr.ErrUnavailable, endpoints, err)
	case classUnavailable:
		return fmt.Errorf("%w: etcd at %s: %v", rpcerr.ErrUnavailable, endpoints, err)
	}
	return err
}

// errClass is what classify makes of an etcd client error.
type errClass int

const (
	classOther errClass = iota
	classNoSpace
	classCorrupt
	classUnavailable
)

// classOf sorts an error of etcd's client without a context.
func classOf(err error) errClass {
	switch {
	case errors.Is(err, rpctypes.ErrNoSpace), errors.Is(err, rpctypes.ErrGRPCNoSpace):
		return classNoSpace
	case errors.Is(err, rpctypes.ErrCorrupt), errors.Is(err, rpctypes.ErrGRPCCorrupt):
		return classCorrupt
	}
	for _, u := range []error{
		rpctypes.ErrNoLeader, rpctypes.ErrNotLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrStopped,
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrUnhealthy, rpctypes.ErrTooManyRequests,
	} {
		if errors.Is(err, u) {
			return classUnavailable
		}
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return codeClass(ee.Code())
	}
	if st, ok := status.FromError(err); ok {
		return codeClass(st.Code())
	}
	return classOther
}

// codeClass sorts a gRPC code of an etcd error that classOf does not know
// by name: a connection refused or cut, say.
func codeClass(c codes.Code) errClass {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded:
		return classUnavailable
	}
	return classOther
}
