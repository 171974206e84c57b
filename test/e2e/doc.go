// Package e2e tests Tern end to end, through the real binary: TestMain builds
// cmd/tern once, each test runs `tern serve` on a data directory of its own,
// and the clients are the Go remote client, the tern CLI and raw gRPC, some
// in child processes so that they can be killed with SIGKILL.
//
// The test binary is also the child: run with TERN_E2E_CHILD=writer or
// consumer, it plays that role instead of running the tests, and reports
// every event on stdout, one line each, written before the next step, so the
// parent knows exactly what was acknowledged when it kills a process:
//
//	open <epoch>             writer: the writer is open (older ones fenced)
//	ack <offset> <payload>   writer: the append was acknowledged
//	got <offset> <payload>   consumer: delivered; acknowledged after the line
//	fenced <message>         writer: an append failed with ErrFenced
//	error <message>          any other failure; the child then exits
//	done                     the child finished its work and closed cleanly
//
// Tests keep to seconds: deadlines are generous only so that nothing hangs,
// and nothing asserts on timing.
package e2e
