/*
 * ring.pml -- Promela model of ringcast's two futex handshakes
 * (/work/shared/DESIGN.md: "Shared-memory layout", "Waiting without lost
 *  wake-ups"; C++: include/ringcast/ring.hpp, include/ringcast/wait.hpp).
 * Checked by tests/model/check.sh (spin + gcc); read that script for the
 * exact configurations.
 *
 * WHAT IS MODELLED
 *   One writer, N readers, a ring of CAP message slots, M messages
 *   (-DN= -DCAP= -DM=; defaults 2, 2, 4).  Positions (tail, head[r]) stand for
 *   the u64 byte counters of the C++ code, counted in whole messages (one
 *   message = one slot, slot of position p = p % CAP); they never wrap.  The
 *   writer publishes messages 0..M-1 (the payload of position p is p), then
 *   closes.  Each reader reads every message in order, checks its payload,
 *   releases it, and ends when wait_for_data returns "closed, no data".
 *     Reader::wait_for_data   steps 1, 3, 4, 5, 6, 7 (notify_seq, reader_sleepers)
 *     Reader::release         head store, fence, conditional wake of the writer
 *     Writer::wait_for_space  the mirror image (space_seq, writer_sleeping)
 *     Writer::publish         payload write, tail store, fence, conditional wake
 *     Writer::close           closed = 1, fence, unconditional wake
 *   Every statement carries a comment naming the C++ function and step.
 *   Each atomic load/store/RMW of the C++ is its own Promela step; a load and
 *   the branch taken on its value are one step.
 *   futex_wait(&word, s) is one atomic step "if word == s then enqueue as a
 *   waiter, else return (EAGAIN)" -- the kernel's guarantee (compare and
 *   enqueue under the futex hash-bucket lock).  The waiter stays blocked until
 *   a futex_wake on that word dequeues it (r_blocked[] / w_blocked = "is in the
 *   kernel's wait queue"); futex_wake(all) dequeues everybody queued then.
 *
 * MEMORY MODEL
 *   Spin interleaves whole statements: it explores sequentially consistent
 *   executions only.  That is adequate here because the C++ separates the two
 *   halves of each Dekker-style pair by a seq_cst operation:
 *     writer "tail store; fence(seq_cst); load reader_sleepers"  against
 *     reader "reader_sleepers += 1; fence(seq_cst); load notify_seq; load tail",
 *     reader "head store; fence(seq_cst); load writer_sleeping"  against
 *     writer "writer_sleeping = 1; fence(seq_cst); load space_seq; load heads".
 *   What a missing fence allows (the later load satisfied before the earlier
 *   store is visible) is modelled explicitly by BUG_NO_FENCE and
 *   BUG_NO_FENCE_RELEASE, which hoist that load above the store.
 *   The fence on the waiting side matters too, and an SC model cannot show
 *   it: the re-check loads (step 5's closed/tail, the writer's re-check of
 *   the heads) are acquire loads, and a seq_cst RMW followed by an acquire
 *   load does not forbid the store->load reordering in the C++ model
 *   (AArch64 LDADDAL/STLR + LDAPR really reorder).  wait.hpp block_until
 *   has that fence (3b: fence(seq_cst) right after the announce); keep it.
 *   Step 4's load of notify_seq must be at least acquire (it is: 3c).
 *   Step names: the brief's Reader::wait_for_data steps 3, 4, 5, 6, 7 are
 *   wait.hpp block_until's 3a, 3c, 3d, 3e, 3f; the writer side runs the same
 *   block_until on space_seq / writer_sleeping (a counter there, a 0/1 flag
 *   here: one writer).
 *
 * WHAT IS ABSTRACTED AWAY
 *   - Record framing, padding, fragments, byte sizes: one message = one slot.
 *   - Step 2, the bounded spin phase of Hybrid waiting: it only repeats
 *     step 1 and adds no behaviour.
 *   - Timeouts / EINTR / spurious futex returns: off by default, because the
 *     protocol must not need them (they would mask lost wake-ups).
 *     -DSPURIOUS lets every futex_wait return early at any time.
 *   - u32 wrap-around of notify_seq / space_seq (ABA after 2^32 bumps).
 *   - Late-attaching readers (head 0), dead processes, eventfd mode.
 *   - The payload write is folded into the tail-store step (readers never
 *     look at or beyond tail); P1 is asserted at the room decision instead.
 *
 * PROPERTIES AND HOW THEY ARE CHECKED
 *   P1 no overwrite: when Writer::wait_for_space decides "room", assert every
 *      reader has released the position that last used the slot
 *      (tail - head[r] < CAP; heads only grow, so this is the strictest
 *      moment); each reader asserts the payload it reads is its head position
 *      (order, no overwritten bytes).
 *   P2 every message delivered: a reader that sees Closed asserts head == M.
 *   P3 no lost wake-up, as an invariant over all reachable states:
 *        reader r queued on notify_seq while (tail > head[r] || closed)
 *          only while the writer is between that store and its wake
 *          (ghost pub_pending);
 *        writer queued on space_seq while it has room
 *          only while some reader is between its head store and its wake
 *          (ghost rel_pending[r]).
 *      It is asserted on every transition that can falsify it (see
 *      check_*_inv below) -- equivalent to a monitor process, without
 *      multiplying the state space.  It catches a lost wake-up even when a
 *      later publish or the close would repair it.
 *   P4 no deadlock / nobody asleep forever: pan's invalid-end-state check.
 *      There are no end labels: only the closing `}` of each process is a
 *      valid end state, so a reader or the writer blocked in futex_wait when
 *      nothing else can run is an error.  -DNO_CLOSE: the writer never closes
 *      (an executor that publishes, then waits for replies) and readers stop
 *      after M messages; there a lost wake-up of the last message is a real
 *      hang, which pan finds with P3 disabled (-DNO_MONITOR).  With close, the
 *      unconditional wake in Writer::close and every later publish repair a
 *      lost data wake-up, which is why P3 is the primary check.
 *   P5 no livelock when futex_wait may return early: -DSPURIOUS compiled with
 *      -DNP, pan -l -f: no non-progress cycle under weak fairness (progress
 *      labels: a publish, a release).  Without -DSPURIOUS the state graph is
 *      acyclic (each loop iteration consumes a wake), so P4 is the whole story.
 *
 * NEGATIVE SWITCHES (check.sh requires pan to report the expected error)
 *   BUG_NO_RECHECK        Reader::wait_for_data without step 5        -> P3 / P4
 *   BUG_NO_FENCE          Writer::publish loads reader_sleepers before its
 *                         tail store is visible (no fence)            -> P3 / P4
 *   BUG_NO_FENCE_RELEASE  Reader::release loads writer_sleeping before its
 *                         head store is visible (no fence)            -> P3 / P4
 *   BUG_SPACE_NO_RECHECK  Writer::wait_for_space without its re-check -> P3 / P4
 *   BUG_ROOM_OFF_BY_ONE   room test lets CAP+1 messages be in flight  -> P1
 *   BUG_CLOSE_ORDER       wait_for_data loads tail before closed      -> P2
 *   NO_MONITOR            drop the P3 assertions (to show P4 alone)
 */

#ifndef N
#define N 2            /* readers (>= 2) */
#endif
#ifndef CAP
#define CAP 2          /* ring capacity, in messages */
#endif
#ifndef M
#define M 4            /* messages published */
#endif
#if N < 2
#error "the model needs N >= 2 (the writer's head loads are unrolled for that)"
#endif

/* ---------------- shared memory ---------------- */
byte tail;             /* WriterLine.tail: published position, stored (release) by the writer only */
bit  closed;           /* Header.flags: closed */
byte notify_seq;       /* WriterLine.notify_seq: futex word the readers sleep on */
byte reader_sleepers;  /* WriterLine.reader_sleepers */
byte space_seq;        /* SpaceLine.space_seq: futex word the writer sleeps on */
bit  writer_sleeping;  /* SpaceLine.writer_sleeping */
byte head[N];          /* ReaderSlot[r].head, stored (release) by reader r only */
byte ring[CAP];        /* data ring: payload of the message held in each slot */

/* ---------------- kernel state: who is queued on which futex word ---------------- */
bit  r_blocked[N];     /* reader r is queued in futex_wait(&notify_seq) */
bit  w_blocked;        /* the writer is queued in futex_wait(&space_seq) */

/* ---------------- ghost state for P3 (not in the C++) ---------------- */
bit  pub_pending;      /* writer is between a tail/closed store and its wake decision */
bit  rel_pending[N];   /* reader r is between its head store and its wake decision */
byte inv_i, inv_m;     /* scratch for the P3 checks, always 0 between steps */
bit  inv_a;

#define MIN2(a, b)    ((a) < (b) -> (a) : (b))

/* Writer::wait_for_space's room test for need = 1 message:
 * tail + need - min_head <= CAP. */
#ifdef BUG_ROOM_OFF_BY_ONE
#define ROOM(mh)      (tail + 1 - (mh) <= CAP + 1)
#else
#define ROOM(mh)      (tail + 1 - (mh) <= CAP)
#endif
#define TRUE_ROOM(mh) (tail + 1 - (mh) <= CAP)

/* P1, writer side: the slot of position tail (last used by position
 * tail - CAP) has been released by every reader. */
#define check_no_overwrite()                                                \
    for (inv_i : 0 .. N-1) { assert(tail - head[inv_i] < CAP) };            \
    inv_i = 0

/* ---------------- P3: no lost wake-up, as an invariant ----------------
 * reader r:   r_blocked[r] && (tail > head[r] || closed)  =>  pub_pending
 * the writer: w_blocked && room                           =>  some rel_pending[r]
 * i.e. a party may be queued on a futex while what it waits for is there only
 * while the party that made it so has not yet taken its wake decision.  The
 * invariant can only become false on these transitions, so it is asserted
 * exactly there (equivalent to a monitor process evaluating it in every
 * state, but it does not multiply the state space):
 *   a reader gets queued in futex_wait      -> check_reader_inv(r)
 *   pub_pending drops to 0 (publish, close) -> check_all_readers_inv()
 *   the writer gets queued in futex_wait    -> check_writer_inv()
 *   some rel_pending drops to 0 (release)   -> check_writer_inv()
 * (tail, closed and heads only grow, and each growth sets the matching
 * pending flag in the same step.)  -DNO_MONITOR removes these assertions, to
 * show what pan's deadlock check finds on its own. */
#define READER_OK(r)  (!(r_blocked[r] && (tail > head[r] || closed) && !pub_pending))
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
        inv_m = MIN2(inv_m, head[inv_i]);                                   \
        if :: rel_pending[inv_i] -> inv_a = 1 :: else fi                    \
    };                                                                      \
    assert(!(w_blocked && TRUE_ROOM(inv_m) && !inv_a));                     \
    inv_i = 0; inv_m = 0; inv_a = 0
#endif

/* futex_wait(&word, val): compare-and-enqueue is one atomic step in the
 * kernel (done under the futex hash-bucket lock, as is futex_wake).
 * who: the caller, 0..N-1 a reader, N the writer (selects the P3 check). */
inline futex_wait(word, val, blocked, who) {
    atomic {
        if
        :: word == val -> blocked = 1       /* value unchanged: enqueue, sleep */
        :: else        -> skip              /* EAGAIN: return at once */
        fi;
        if
        :: who < N -> check_reader_inv(who)
        :: else    -> check_writer_inv()
        fi
    };
    if
    :: !blocked -> skip                     /* dequeued by a futex_wake (or never queued) */
#ifdef SPURIOUS
    :: atomic { blocked -> blocked = 0 }    /* timeout / EINTR / spurious return */
#endif
    fi
}

/* futex_wake(&notify_seq, all): dequeue every reader queued now */
inline futex_wake_readers() {
    for (inv_i : 0 .. N-1) { r_blocked[inv_i] = 0 };
    inv_i = 0
}

/* Reader::wait_for_data steps 1 and 5 load closed, then tail, then decide
 * "have data or closed".  closed is loaded first (acquire): if it reads 1,
 * the tail loaded after it is final, so "no data and closed" really means
 * drained.  Each load is one step; the second load and the decision on it are
 * one step.  BUG_CLOSE_ORDER loads tail first. */
#ifdef BUG_CLOSE_ORDER
#define LOAD_FIRST    t = tail                              /* BUG: tail first ... */
#define AVAIL         (t > head[_pid] || closed)            /* ... closed may be newer than t */
#define LOAD_SECOND   c = closed
#else
#define LOAD_FIRST    c = closed                            /* load closed (acquire) */
#define AVAIL         (tail > head[_pid] || c)              /* load tail (acquire), decide */
#define LOAD_SECOND   t = tail
#endif

/* Writer::publish: is reader_sleepers > 0 ?  With the fence this load comes
 * after the tail store; BUG_NO_FENCE takes the value loaded before it. */
#ifdef BUG_NO_FENCE
#define SLEEPERS      sl
#else
#define SLEEPERS      (reader_sleepers > 0)
#endif

/* Reader::release: is writer_sleeping set ?  Same, for BUG_NO_FENCE_RELEASE. */
#ifdef BUG_NO_FENCE_RELEASE
#define WSLEEPING     ws
#else
#define WSLEEPING     writer_sleeping
#endif

/* Writer::wait_for_space loads head[0..N-1] one by one (separate atomic loads
 * in C++); the last load and the room decision on the minimum are one step. */
#define LAST_HEAD_ROOM    (i == N-1 &&  ROOM(MIN2(mh, head[i])))
#define LAST_HEAD_NOROOM  (i == N-1 && !ROOM(MIN2(mh, head[i])))

active [N] proctype Reader()              /* _pid 0..N-1 = reader rank */
{
    byte s;    /* notify_seq as loaded in step 4 */
    byte t;    /* tail, as loaded by wait_for_data */
    bit  c;    /* closed, as loaded by wait_for_data */
    bit  ws;   /* writer_sleeping as loaded early (BUG_NO_FENCE_RELEASE only) */

    do
    ::
#ifdef NO_CLOSE
        if
        :: head[_pid] == M -> break       /* has all M messages: done (no close in this mode) */
        :: else
        fi;
#endif
        /* ===== Reader::wait_for_data ===== */
        do
        ::  LOAD_FIRST;                                  /* Reader::wait_for_data step 1: load closed */
            if
            :: atomic { AVAIL -> LOAD_SECOND }; break    /* step 1: tail > my head or closed: return */
            :: atomic { !AVAIL -> t = 0; c = 0 }         /* step 1: nothing: go on */
            fi;
            /* step 2 (bounded spin re-checking step 1): abstracted, adds no behaviour */
            reader_sleepers++;                           /* step 3: reader_sleepers += 1 (seq_cst fetch_add) */
            s = notify_seq;                              /* step 4: s = notify_seq (acquire) */
#ifndef BUG_NO_RECHECK
            LOAD_FIRST;                                  /* step 5: re-check: load closed */
            if
            :: atomic { AVAIL -> LOAD_SECOND; s = 0 };   /* step 5: tail > my head or closed: */
               reader_sleepers--;                        /* step 5: reader_sleepers -= 1, return */
               break
            :: atomic { !AVAIL -> t = 0; c = 0 }         /* step 5: nothing: go to sleep */
            fi;
#endif
            futex_wait(notify_seq, s, r_blocked[_pid], _pid); /* step 6: futex_wait(&notify_seq, s) */
            atomic { reader_sleepers--; s = 0 }          /* step 7: reader_sleepers -= 1, go to step 1 */
        od;

        /* ===== caller of Reader::wait_for_data (peek / read): data or Closed,
         * decided on the (tail, closed) that wait_for_data loaded ===== */
        if
        :: atomic { t > head[_pid] ->             /* data: */
               /* Reader::read: copy the payload of the record at my head */
               assert(ring[head[_pid] % CAP] == head[_pid]); /* P1: in order, not overwritten */
               t = 0; c = 0 }
        :: atomic { else -> assert(c) };          /* returned without data: must be closed */
           break                                  /* Closed: drained, done */
        fi;

        /* ===== Reader::release ===== */
#ifdef BUG_NO_FENCE_RELEASE
        ws = writer_sleeping;                     /* BUG: Reader::release loads writer_sleeping before its head store is visible */
#endif
progress_read:
        atomic { head[_pid]++; rel_pending[_pid] = 1 }  /* Reader::release: head = new_head (release) */
        if
        :: WSLEEPING ->                           /* Reader::release: fence(seq_cst); writer_sleeping != 0 */
            space_seq++;                          /* Reader::release: space_seq += 1 */
            atomic {                              /* Reader::release: futex_wake(&space_seq, all) */
                w_blocked = 0; rel_pending[_pid] = 0; ws = 0;
                check_writer_inv()
            }
        :: atomic { !WSLEEPING ->                 /* Reader::release: writer_sleeping == 0: no syscall */
               rel_pending[_pid] = 0; ws = 0;
               check_writer_inv() }
        fi
    od;
    assert(head[_pid] == M)                       /* P2: every message was delivered */
}

active proctype Writer()
{
    byte mh;   /* min head, as loaded so far */
    byte i;    /* reader index of the head load */
    byte s;    /* space_seq as loaded */
    bit  sl;   /* reader_sleepers > 0 as loaded early (BUG_NO_FENCE only) */

    do
    :: tail == M -> break                          /* all M messages published */
    :: else ->
        /* ===== Writer::wait_for_space (need = 1 message) ===== */
        do
        ::  atomic { mh = head[0]; i = 1 };        /* Writer::wait_for_space: load heads, min ... */
            do
            :: atomic { i < N-1 -> mh = MIN2(mh, head[i]); i++ }  /* wait_for_space: load head[i] */
            :: atomic { LAST_HEAD_ROOM -> mh = 0; i = 0;      /* wait_for_space: load last head; tail+need-min_head <= CAP */
                   check_no_overwrite() };
               goto have_room                                /* wait_for_space: return */
            :: atomic { LAST_HEAD_NOROOM -> mh = 0; i = 0 }; /* wait_for_space: no room */
               break
            od;
            writer_sleeping = 1;                   /* Writer::wait_for_space: writer_sleeping = 1 (seq_cst) */
            s = space_seq;                         /* Writer::wait_for_space: s = space_seq */
#ifndef BUG_SPACE_NO_RECHECK
            atomic { mh = head[0]; i = 1 };        /* Writer::wait_for_space: re-check room after announcing */
            do
            :: atomic { i < N-1 -> mh = MIN2(mh, head[i]); i++ }  /* wait_for_space re-check: load head[i] */
            :: atomic { LAST_HEAD_ROOM -> mh = 0; i = 0; s = 0; /* wait_for_space re-check: load last head; room */
                   check_no_overwrite() };
               writer_sleeping = 0;                              /* wait_for_space: writer_sleeping = 0, return */
               goto have_room
            :: atomic { LAST_HEAD_NOROOM -> mh = 0; i = 0 };     /* wait_for_space re-check: still no room */
               break
            od;
#endif
            futex_wait(space_seq, s, w_blocked, N); /* Writer::wait_for_space: futex_wait(&space_seq, s) */
            atomic { writer_sleeping = 0; s = 0 }   /* Writer::wait_for_space: writer_sleeping = 0, loop */
        od;

have_room:
        /* ===== Writer::publish ===== */
#ifdef BUG_NO_FENCE
        sl = (reader_sleepers > 0);               /* BUG: Writer::publish loads reader_sleepers before its tail store is visible */
#endif
        /* The payload bytes are written between wait_for_space's return and the
         * tail store; readers never look at or beyond tail, so the write is
         * folded into the tail store's step.  Whether the slot was free is
         * asserted (P1) at the room decision itself: heads only grow, so that
         * is the strictest moment; any later write time is then safe too. */
        atomic {
            ring[tail % CAP] = tail;              /* Writer::publish: write the payload bytes into the ring */
            tail++; pub_pending = 1               /* Writer::publish: tail = new_tail (release) */
        };
progress_pub:
        if
        :: SLEEPERS ->                            /* Writer::publish: fence(seq_cst); reader_sleepers > 0 */
            notify_seq++;                         /* Writer::publish: notify_seq += 1 */
            atomic {                              /* Writer::publish: futex_wake(&notify_seq, all) */
                futex_wake_readers();
                pub_pending = 0; sl = 0;
                check_all_readers_inv()
            }
        :: atomic { !SLEEPERS ->                  /* Writer::publish: no sleeper: no syscall */
               pub_pending = 0; sl = 0;
               check_all_readers_inv() }
        fi
    od;

#ifndef NO_CLOSE
    /* ===== Writer::close ===== */
    atomic { closed = 1; pub_pending = 1 };       /* Writer::close: closed = 1 (release) */
    notify_seq++;                                 /* Writer::close: fence(seq_cst); notify_seq += 1 */
    atomic {                                      /* Writer::close: futex_wake(&notify_seq, all), unconditional */
        futex_wake_readers();
        pub_pending = 0;
        check_all_readers_inv()
    }
#endif
}
