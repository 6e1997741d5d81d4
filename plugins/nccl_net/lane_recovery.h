// Failover of NCCL comms whose lanes die without a PREPARE (an unplanned
// circuit loss): what the lanes did not deliver is re-sent over the comm's
// home EPS lane, exactly once and in order per tag, and the comm goes on
// there. The runtime's collectives do the same for their direct links
// (runtime/collectives/alltoall_dynamic.cc: receipts over EPS, re-sends of
// what a dead link lost); both rely on the transport's stall detection
// (DeviceOptions::stall_timeout, MIXNET_PATH_STALL_MS on OCS NICs) to error
// a dark path's connection on both ends.
//
// Home: the EPS lane a comm's connect/accept made; it stays open for the
// comm's life. Every other lane (circuits, and EPS lanes a move made) is
// guarded:
//  * ACK: the receiver tells the sender, per tag, how many parts from the
//    first have all arrived (coalesced, one in flight, on its home lane). A
//    send part on a guarded lane completes for NCCL only once acknowledged,
//    so its buffer is still there when it must be sent again.
//  * Failure: a guarded part failing (not a part the receiver refused as
//    larger than its receive: that is the request's error at both ends,
//    and the comm stays on its lane), a guarded lane's control receive
//    failing, or a control send on one failing starts a failover (a lane
//    being retired after a finished move closing is expected and ignored).
//    A guarded request is complete only when its pieces are over and none
//    failed, checked after they are: a piece that fails while NCCL tests
//    it (its connection fails on the transport's progress thread) starts a
//    failover, never the request's error.
//    Both ends close every guarded lane of the comm at once (after the close
//    nothing more lands in a buffer) and fall back to home:
//      - the receiver re-posts, on home and in posting order, every receive
//        part on a guarded lane that did not arrive, and sends RECOVER with
//        its per-tag part counts and the re-posted part numbers;
//      - the sender stops posting (NCCL sees NULL requests and retries) and
//        sends LOST, unless the receiver's RECOVER came first; on RECOVER it
//        counts every unacknowledged guarded part numbered below the
//        receiver's count and not listed as arrived, and re-sends the others
//        on home in posting order (those the receiver listed, and those it
//        had not posted yet), then posts again.
//    Per tag, home carries only parts numbered below any guarded one (a comm
//    leaves home once and comes back only by a failover), so the re-posted
//    receives and the re-sent parts pair up in order; a part that partly
//    arrived over the dead lane is written again whole, with the same bytes.
//    Both ends count recoveries (RECOVER/LOST carry the number), so a late
//    LOST is ignored. After a failover the comm stays on home until the
//    routing changes (no move back onto the dead circuit).
//  * Home failing is the peer failing: the comm fails (ncclRemoteError) as
//    before. A sender whose RECOVER does not come within the move timeout
//    fails too, as do a receiver whose RESENT does not, one that cannot
//    re-post, and one that gets a malformed split header (multipath.h).
//    A failed comm's guarded request completes (for NCCL: with an error)
//    only once none of its pieces can still move: the first test of one
//    closes all the comm's connections, home's too, which ends every piece
//    still posted; a part without all its pieces is an error, never a short
//    success.
// Threads: whoever holds the comm's mutex (NCCL's proxy threads in test,
// isend and irecv; the mover thread).
#pragma once
