/*
 * ring.pml -- Promela model of ringcast's two futex handshakes
 * (see /work/shared/DESIGN.md, "Shared-memory layout" and
 *  "Waiting without lost wake-ups"; checked by tests/model/check.sh).
 *
 * WHAT IS MODELLED
 *   One writer, N readers (#define N), a ring of CAP message slots, M messages.
 *   Positions (tail, head[r]) are the u64 byte counters of the C++ code,
 *   counted here in whole messages (one message = one slot); slot of a
 *   position p is p % CAP.  The writer publishes messages 0..M-1 (the payload
 *   of the message at position p is the value p), then closes.  Each reader
 *   reads every message in order, checks the payload, releases it, and ends
 *   when it sees `closed` with no data left.
 *     - Reader::wait_for_data   steps 1, 3-7 (futex on notify_seq, reader_sleepers)
 *     - Reader::release         head store, fence, conditional wake of the writer
 *     - Writer::wait_for_space  mirror image (futex on space_seq, writer_sleeping)
 *     - Writer::publish         payload write, tail store, fence, conditional wake
 *     - Writer::close           closed = 1, fence, unconditional wake
 *   futex_wait(&word, s) is one atomic step "if word == s then enqueue as a
 *   waiter else return (EAGAIN)", exactly the kernel's guarantee (the compare
 *   and the enqueue happen under the futex hash-bucket lock); the waiter then
 *   stays blocked until a futex_wake on that word dequeues it (the *_blocked
 *   flag below is "is in the kernel's wait queue").  futex_wake(all) dequeues
 *   every waiter queued at that moment.
 *
 * MEMORY MODEL
 *   Spin interleaves whole statements, i.e. it explores only sequentially
 *   consistent executions.  That is sound for this protocol *because* the
 *   C++ puts a seq_cst operation between the two halves of each Dekker-style
 *   pair: writer "tail store ; fence(seq_cst) ; load reader_sleepers" against
 *   reader "reader_sleepers fetch_add(seq_cst) ; load notify_seq ; load tail",
 *   and reader "head store ; fence(seq_cst) ; load writer_sleeping" against
 *   writer "writer_sleeping = 1 (seq_cst) ; load space_seq ; load heads".
 *   What a missing fence would allow (the later load being satisfied before
 *   the earlier store is visible) is modelled explicitly by the BUG_NO_FENCE*
 *   switches, which hoist the load above the store.
 *   NOTE for the C++ side: under the C++ memory model the loads on the
 *   *announcing* side (reader step 5 re-check of tail/closed, writer re-check
 *   of the heads) must themselves be seq_cst, or be preceded by
 *   atomic_thread_fence(seq_cst); a seq_cst RMW/store followed by an
 *   *acquire* load does not forbid the store->load reordering formally
 *   (and ARMv8.3 LDAPR really allows it).  Step 4's load of notify_seq must
 *   be at least acquire (so that seeing the writer's bump implies seeing the
 *   tail that was stored before it).
 *
 * WHAT IS ABSTRACTED AWAY
 *   - Byte-granular records, padding, fragments: one message = one slot.
 *   - The bounded spin phase of Hybrid waiting (step 2): it only repeats
 *     step 1, which adds no new behaviour.
 *   - Timeouts / EINTR / spurious futex returns: OFF by default, because the
 *     protocol must NOT need them (they would hide lost wake-ups);
 *     -DSPURIOUS lets every futex_wait return early at any time, to check
 *     that early returns break nothing.
 *   - Step 1 and step 5 read tail and closed in one step (both only decide
 *     whether to wait, so a stale mix is harmless there).  The reader's
 *     decision "data or Closed" after waking is modelled load by load,
 *     because there the order matters (see BUG_CLOSE_ORDER).
 *   - Late-attaching readers, liveness of dead processes, eventfd mode.
 *
 * PROPERTIES AND HOW THEY ARE CHECKED (pan, safety mode)
 *   P1 no overwrite: Writer::publish asserts, at the moment it writes the
 *      slot, that every reader has released the message that used it
 *      (tail - head[r] < CAP); each reader asserts the payload it reads is
 *      the position it expects (order + no torn/overwritten data).
 *   P2 every message is delivered: a reader that ends asserts head == M.
 *   P3 no lost wake-up, as an invariant (process Monitor, evaluated in every
 *      reachable state): a reader queued in futex_wait while data is
 *      available or the queue is closed is allowed only while the writer is
 *      between that tail/closed store and its wake decision (pub_pending);
 *      the writer queued in futex_wait while it has room is allowed only
 *      while some reader is between its head store and its wake decision
 *      (rel_pending).  This catches every lost wake-up, also one that a later
 *      publish would happen to repair.
 *   P4 no deadlock: pan's invalid-end-state check.  Only the final `}` of
 *      each process is a valid end state (no end labels), so a reader or the
 *      writer blocked in futex_wait forever is an error.  With -DNO_CLOSE the
 *      writer does not close (an executor that publishes, then waits for
 *      replies) and readers stop after M messages: there a lost wake-up of
 *      the last message is a real hang, found without the Monitor
 *      (-DNO_MONITOR).  (With close, the unconditional wake in
 *      Writer::close and any later publish repair a lost data wake-up, which
 *      is why P3 exists.)
 *   P5 no livelock with early returns: -DSPURIOUS -DNP, pan -l -f (weak
 *      fairness): no infinite fair run without a progress label (a publish,
 *      a read, or termination).  Without -DSPURIOUS the state graph has no
 *      cycles at all (every loop iteration consumes a wake-up).
 *
 * NEGATIVE SWITCHES (check.sh requires pan to find an error for each)
 *   BUG_NO_RECHECK        drop Reader::wait_for_data step 5
 *   BUG_NO_FENCE          Writer::publish loads reader_sleepers before the tail
 *                         store is visible (no fence)
 *   BUG_NO_FENCE_RELEASE  Reader::release loads writer_sleeping before the head
 *                         store is visible (no fence)
 *   BUG_SPACE_NO_RECHECK  drop Writer::wait_for_space's re-check
 *   BUG_ROOM_OFF_BY_ONE   Writer::wait_for_space accepts CAP+1 outstanding msgs
 *   BUG_CLOSE_ORDER       reader loads tail before closed when deciding
 *                         "data or Closed" (drops the last messages)
 */

#ifndef N
#define N 2            /* readers */
#endif
#ifndef CAP
#define CAP 2          /* ring capacity, in messages */
#endif
#ifndef M
#define M 4            /* messages published */
#endif

/* ---- shared memory ---- */
byte tail;             /* WriterLine.tail: published position (release store by writer) */
bit  closed;           /* Header.flags.closed */
byte notify_seq;       /* WriterLine.notify_seq: futex word readers sleep on */
byte reader_sleepers;  /* WriterLine.reader_sleepers */
byte space_seq;        /* SpaceLine.space_seq: futex word the writer sleeps on */
bit  writer_sleeping;  /* SpaceLine.writer_sleeping */
byte head[N];          /* ReaderSlot[r].head */
byte ring[CAP];        /* data ring: payload of the message in each slot */

/* ---- kernel state: who is queued on a futex word ---- */
bit  r_blocked[N];     /* reader r is queued in futex_wait(&notify_seq) */
bit  w_blocked;        /* writer is queued in futex_wait(&space_seq)   */

/* ---- ghost state, only for the Monitor (P3) ---- */
bit  pub_pending;      /* writer is between a tail/closed store and its wake decision */
bit  rel_pending[N];   /* reader r is between its head store and its wake decision */

/* room for one more message, given the minimum head the writer loaded */
#ifdef BUG_ROOM_OFF_BY_ONE
#define ROOM(mh)      (tail + 1 - (mh) <= CAP + 1)
#else
#define ROOM(mh)      (tail + 1 - (mh) <= CAP)
#endif
#define TRUE_ROOM(mh) (tail + 1 - (mh) <= CAP)

#define HAS_DATA(r)   (tail > head[r] || closed)

byte inv_i, inv_m;      /* scratch for the invariant checks, always 0 between steps */
bit  inv_a;

/* P3, reader half, for reader r: not queued with data/closed, unless the
 * wake-up is on its way (the writer is between its store and its wake). */
#define READER_OK(r)  (!(r_blocked[r] && HAS_DATA(r) && !pub_pending))

/* P3 is an invariant over all reachable states.  It can only become false on
 * the transitions below, so it is asserted exactly there (cheaper than a
 * monitor process, and equivalent):
 *   a reader gets queued          -> check_reader_inv(me)   (in futex_wait)
 *   pub_pending drops to 0        -> check_all_readers_inv()
 *   the writer gets queued        -> check_writer_inv()     (in futex_wait)
 *   some rel_pending drops to 0   -> check_writer_inv()
 * (tail/closed/head only grow, and each growth sets the pending flag in the
 *  same atomic step.)  -DNO_MONITOR removes the assertions (to show what the
 *  plain deadlock check finds on its own). */
#ifdef NO_MONITOR
#define check_reader_inv(r)      skip
#define check_all_readers_inv()  skip
#define check_writer_inv()       skip
#else
#define check_reader_inv(r)      assert(READER_OK(r))
#define check_all_readers_inv()  for (inv_i : 0 .. N-1) { assert(READER_OK(inv_i)) }; inv_i = 0
#define check_writer_inv()                                                  \
    inv_m = 255; inv_a = 0;                                                 \
    for (inv_i : 0 .. N-1) {                                                \
        if :: head[inv_i] < inv_m -> inv_m = head[inv_i] :: else fi;        \
        if :: rel_pending[inv_i] -> inv_a = 1 :: else fi                    \
    };                                                                      \
    assert(!(w_blocked && TRUE_ROOM(inv_m) && !inv_a));                     \
    inv_i = 0; inv_m = 0; inv_a = 0
#endif

/* futex_wait(&word, val): compare-and-enqueue is atomic in the kernel. */
/* who: the caller, 0..N-1 a reader, N the writer (selects the P3 check). */
inline futex_wait(word, val, blocked, who) {
    atomic {
        if
        :: word == val -> blocked = 1   /* value unchanged: sleep */
        :: else        -> skip          /* EAGAIN: return at once */
        fi;
        if
        :: who < N -> check_reader_inv(who)
        :: else    -> check_writer_inv()
        fi
    };
    if
    :: !blocked -> skip                 /* dequeued by futex_wake (or never queued) */
#ifdef SPURIOUS
    :: atomic { blocked -> blocked = 0 }/* timeout / EINTR / spurious return */
#endif
    fi
}

/* loads of every reader's head, one load per step, into mh = min head */
/* Loads of every reader's head, one load per step (they are separate atomic
 * loads in C++), into mh = minimum head. */
inline load_min_head(mh, i) {
    atomic { mh = head[0]; i = 1 };
    do
    :: atomic { i < N -> if :: head[i] < mh -> mh = head[i] :: else fi; i++ }
    :: atomic { else -> i = 0 }; break
    od
}

active [N] proctype Reader() {       /* _pid 0..N-1 = reader rank */
    byte s;    /* notify_seq as loaded in step 4 */
    bit  c;    /* closed, as loaded for the "data or Closed" decision */
    byte t;    /* tail,   as loaded for the "data or Closed" decision */
    bit  ws;   /* writer_sleeping as loaded in Reader::release */

    do
    ::
#ifdef NO_CLOSE
        if
        :: head[_pid] == M -> break    /* got all M messages: done */
        :: else
        fi;
#endif
        /* ===== Reader::wait_for_data ===== */
        do
        :: HAS_DATA(_pid) -> break                /* step 1: tail (acquire) > head || closed: return */
        /* step 2 (bounded spin re-checking step 1): abstracted, it adds no behaviour */
        :: else ->
            reader_sleepers++;                    /* step 3: reader_sleepers.fetch_add(1, seq_cst) */
            s = notify_seq;                       /* step 4: s = notify_seq (acquire) */
#ifndef BUG_NO_RECHECK
            if
            :: atomic { HAS_DATA(_pid) ->         /* step 5: re-check tail/closed after announcing */
                   reader_sleepers--; s = 0 };    /* step 5: undo the announcement (-= 1), return */
               break
            :: else
            fi;
#endif
            futex_wait(notify_seq, s, r_blocked[_pid], _pid); /* step 6: futex_wait(&notify_seq, s) */
            atomic { reader_sleepers--; s = 0 }   /* step 7: reader_sleepers -= 1, loop to step 1 */
        od;

        /* ===== Reader::wait_for_data's caller (peek/read): data, or Closed? ===== */
#ifdef BUG_CLOSE_ORDER
        t = tail;                                 /* BUG: tail loaded first ...            */
        c = closed;                               /*      ... so closed may be newer than t */
#else
        c = closed;                               /* load closed (acquire) first,          */
        t = tail;                                 /* then tail: covers every message published before close */
#endif
        if
        :: atomic { t > head[_pid] ->
               /* read the record at head (the payload copy) */
               assert(ring[head[_pid] % CAP] == head[_pid]); /* P1: in order, not overwritten */
               c = 0; t = 0 };

            /* ===== Reader::release ===== */
#ifdef BUG_NO_FENCE_RELEASE
            ws = writer_sleeping;                 /* BUG: load satisfied before the head store is visible */
            atomic { head[_pid]++; rel_pending[_pid] = 1 } /* Reader::release: head = new_head (release) */
#else
progress_read:
            atomic { head[_pid]++; rel_pending[_pid] = 1 } /* Reader::release: head = new_head (release) */
            ws = writer_sleeping;                 /* Reader::release: fence(seq_cst); load writer_sleeping */
#endif
            if
            :: ws ->
                space_seq++;                      /* Reader::release: space_seq += 1 */
                atomic {                          /* Reader::release: futex_wake(&space_seq, all) */
                    w_blocked = 0; rel_pending[_pid] = 0; ws = 0;
                    check_writer_inv()
                }
            :: atomic { else ->                   /* Reader::release: no sleeper, no syscall */
                   rel_pending[_pid] = 0;
                   check_writer_inv() }
            fi
        :: else ->
            assert(c);                            /* woke without data => must be closed */
            break                                 /* Closed, and everything drained */
        fi
    od;
    assert(head[_pid] == M)                       /* P2: every message was delivered */
}

active proctype Writer() {
    byte mh;   /* min head as loaded */
    byte i;
    byte s;    /* space_seq as loaded */
    bit  sl;   /* reader_sleepers > 0, as loaded */

    do
    :: tail == M -> break
    :: else ->
        /* ===== Writer::wait_for_space (need = 1 message) ===== */
        do
        :: load_min_head(mh, i);                  /* wait_for_space: load min over readers' heads */
            if
            :: atomic { ROOM(mh) -> mh = 0 }; break /* wait_for_space: tail+need-min_head <= CAP: return */
            :: else
            fi;
            writer_sleeping = 1;                  /* wait_for_space: writer_sleeping = 1 (seq_cst) */
            s = space_seq;                        /* wait_for_space: s = space_seq */
#ifndef BUG_SPACE_NO_RECHECK
            load_min_head(mh, i);                 /* wait_for_space: re-check room after announcing */
            if
            :: atomic { ROOM(mh) ->
                   writer_sleeping = 0; mh = 0; s = 0 }; /* wait_for_space: undo, return */
               break
            :: else
            fi;
#endif
            futex_wait(space_seq, s, w_blocked, N); /* wait_for_space: futex_wait(&space_seq, s) */
            atomic { writer_sleeping = 0; mh = 0; s = 0 }  /* wait_for_space: writer_sleeping = 0, loop */
        od;

        /* ===== Writer::publish =====
         * The payload write is folded into the tail store: readers never look
         * at a slot at or beyond tail, and the overwrite assertion below is
         * evaluated against the heads at that moment either way. */
#ifdef BUG_NO_FENCE
        sl = (reader_sleepers > 0);               /* BUG: load satisfied before the tail store is visible */
#endif
        atomic {
            for (i : 0 .. N-1) {                  /* publish: write payload bytes into the ring ... */
                assert(tail - head[i] < CAP)      /* P1: ... only into slots every reader released */
            };
            ring[tail % CAP] = tail;
            i = 0;
            tail++; pub_pending = 1               /* publish: tail = new_tail (release) */
        };
#ifndef BUG_NO_FENCE
progress_pub:
        sl = (reader_sleepers > 0);               /* publish: fence(seq_cst); load reader_sleepers */
#endif
        if
        :: sl ->
            notify_seq++;                         /* publish: notify_seq += 1 */
            atomic {                              /* publish: futex_wake(&notify_seq, all) */
                for (i : 0 .. N-1) { r_blocked[i] = 0 };
                i = 0; pub_pending = 0; sl = 0;
                check_all_readers_inv()
            }
        :: atomic { else ->                       /* publish: no sleeper, no syscall */
               pub_pending = 0;
               check_all_readers_inv() }
        fi
    od;

#ifndef NO_CLOSE
    /* ===== Writer::close ===== */
    atomic { closed = 1; pub_pending = 1 }        /* close: closed = 1 (release) */
    notify_seq++;                                 /* close: fence(seq_cst); notify_seq += 1 */
    atomic {                                      /* close: futex_wake(&notify_seq, all), unconditional */
        for (i : 0 .. N-1) { r_blocked[i] = 0 };
        i = 0; pub_pending = 0;
        check_all_readers_inv()
    }
#endif
}
