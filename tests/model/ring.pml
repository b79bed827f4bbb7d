/*
 * ring.pml -- Promela model of ringcast's broadcast ring: its two futex
 * handshakes (data, space), the per-endpoint sleep announcements, and what
 * happens to a rank whose reader dies: the claim by a replacement and the
 * writer's eviction.
 * C++: include/ringcast/wait.hpp (steps 3a..3f, w1..w3),
 *      include/ringcast/ring.hpp, include/ringcast/detail/ring_inl.hpp,
 *      include/ringcast/layout.hpp (owner word, announcement bits),
 *      src/ring.cpp (claim, liveness check, eviction).
 * The gather doorbell is modelled in tests/model/gather.pml.
 * Checked by tests/model/check.sh (spin + gcc); read that script for the
 * exact configurations.
 *
 * WHAT IS MODELLED
 *   One writer, N readers (ranks 0..N-1), a ring of CAP message slots, M
 *   messages (-DN= -DCAP= -DM=; defaults 2, 2, 4).  Positions (tail, head[r])
 *   stand for the u64 byte counters of the C++ code, counted in whole messages
 *   (one message = one slot, slot of position p = p % CAP); they never wrap.
 *   The writer publishes messages 0..M-1 (the payload of position p is p),
 *   then closes.  Each reader reads every message in order, checks its
 *   payload, releases it, and ends when wait_for_data returns "closed, no
 *   data".
 *     Reader::wait_for_data   block_until on the data site: case 1, 3a..3f
 *                             (notify_seq, announcement bit r of sleep_bits)
 *     Reader::store_head      w1 head.exchange, w2 load writer_sleeping, w3
 *     Writer::wait_for_space  block_until on the space site: case 1, 3a..3f
 *                             (space_seq, writer_sleeping)
 *     Writer::commit_record   payload write, w1 tail.exchange, w2 load the
 *                             announcement bits, w3 (its step 5, the gather
 *                             bell: tests/model/gather.pml)
 *     Writer::wake_ahead      (-DAHEAD) before any message, or not: w2 and
 *                             the futex half of w3 with no cursor moved
 *     Writer::close           closed = 1, wake_all (fence, seq += 1, wake)
 *   Every statement carries a comment naming the C++ function and step.
 *   Each atomic load/store/RMW of the C++ is its own Promela step; a load and
 *   the branch taken on its value are one step.
 *   futex_wait(&word, s) is one atomic step "if word == s then enqueue as a
 *   waiter, else return (EAGAIN)" -- the kernel's guarantee (compare and
 *   enqueue under the futex hash-bucket lock).  The waiter stays blocked until
 *   a futex_wake on that word dequeues it (r_blocked[] / w_blocked = "is in the
 *   kernel's wait queue"); futex_wake(all) dequeues everybody queued then.
 *
 * ANNOUNCEMENTS (wait.hpp "Announcements", layout.hpp ReaderSleepLine)
 *   A waiter announces itself with its own bit, never a shared count: reader
 *   r sets bit r of sleep_bits (the first 64-bit word of
 *   ReaderSleepLine.sleeping; the model has N <= 8 ranks, so one word and one
 *   seq_cst load for w2) with a seq_cst fetch_or (3a) and clears it with
 *   fetch_and (3d, 3f: retract).  The writer owns writer_sleeping (bit 0).
 *
 * DEAD READERS (-DDEATH; wait.hpp "Announcements", src/ring.cpp)
 *   The reader of rank DYING (0) may be killed (SIGKILL) at any step,
 *   including while queued in futex_wait (the kernel drops a dead task from
 *   the queue): a Killer process sets die_now at any moment, and the
 *   reader's whole body sits in an `unless` on it.  What the dead process
 *   left in shared memory stays: its announcement bit, its head (only whole
 *   released records), its owner word {attached, its pid}.  The same Promela
 *   process then plays the rank's replacement reader (a new process, another
 *   pid), which attaches with
 *     C0 load the owner word; evicted -> give up (Error peer_dead)
 *     C1 CAS owner word  {attached, dead pid} -> {attached, my pid}
 *        (failed: reload, C0)
 *     C2 clear own sleeping flag (seq_cst fetch_and, wait.hpp
 *        clear_announcement), before its first wait
 *   and then reads on from the rank's head.  The writer, while blocked for
 *   space, runs its liveness check (on_idle of block_until, every
 *   liveness_interval: its futex_wait has that timeout, so under -DDEATH it
 *   may return early at any time) with eviction on:
 *     E0 load the owner word; attached and the pid is dead (probe)?
 *     E1 CAS owner word to evicted  (expected: the word E0 loaded)
 *     E2 clear the evicted rank's sleeping flag (fetch_and)
 *   From E1 on the writer ignores that rank's head (min_reader_head_acquire)
 *   and may overwrite its unread slots.  C1 and E1 are CASes on the same
 *   word with the same expected value, so exactly one of them wins.
 *   The owner word {state, pid, start} is two variables here (owner_state,
 *   owner_pid) that the correct design changes together in one atomic step;
 *   only BUG_EVICT_CHECK_THEN_STORE (the old code: separate state and pid
 *   words) changes them separately.
 *
 * MEMORY MODEL
 *   Spin interleaves whole statements: it explores sequentially consistent
 *   executions only.  That is adequate here because the C++ separates the two
 *   halves of each Dekker-style pair by seq_cst operations, which all lie in
 *   the single total order S, each thread's in program order:
 *     waker  "w1 cursor.exchange(v, seq_cst); w2 load announcement (seq_cst)"
 *     waiter "3a fetch_or own bit (seq_cst); 3b fence(seq_cst); 3c load seq;
 *             3d re-check loads"
 *   (data: cursor = tail, announcement = sleep_bits; space: cursor = head[r],
 *   announcement = writer_sleeping).  w1 is an RMW and w2 a seq_cst load after
 *   it in program order: no fence between them is needed (wait.hpp
 *   publish_and_notify).  What a weaker w1 allows -- a plain release store,
 *   whose w2 load may be satisfied before the store is visible -- is modelled
 *   explicitly by BUG_W1_RELEASE_STORE and BUG_HEAD_RELEASE_STORE, which hoist
 *   w2 above w1.
 *   The fence on the waiting side matters too, and an SC model cannot show
 *   it: the re-check loads (3d: the reader's closed/tail, the writer's heads)
 *   are acquire loads, and a seq_cst RMW followed by an acquire load does not
 *   forbid the store->load reordering in the C++ model (AArch64 LDADDAL/STLR
 *   + LDAPR really reorder).  wait.hpp block_until has that fence (3b: right
 *   after the announce); keep it.  3c's load of seq must be at least acquire.
 *   The retract (3d/3f) is relaxed in the C++; here it takes effect at once.
 *   A retract that becomes visible late only makes w2 see a set bit longer:
 *   one needless wake, never a lost one.
 *
 * WHAT IS ABSTRACTED AWAY
 *   - Record framing, padding, fragments, byte sizes: one message = one slot.
 *     (Fragmented messages in a gather reply ring: tests/model/gather.pml.)
 *   - Case 2 of block_until, the bounded spin: it only repeats case 1 (its
 *     steps, and case 1 itself where a spin follows, may look at part of it,
 *     a reader's stamp alone (SpinLook); every checkpoint, a cancel and every
 *     way out of the spin looks at all of it).
 *   - Timeouts / EINTR / spurious futex returns of the readers: off by
 *     default, because the protocol must not need them (they would mask lost
 *     wake-ups).  -DSPURIOUS lets every futex_wait return early at any time.
 *     The writer's wait has its liveness timeout under -DDEATH (above).
 *   - u32 wrap-around of notify_seq / space_seq (ABA after 2^32 bumps).
 *   - Late-attaching readers (head 0), clean detach (detached / left),
 *     cancel, the writer's death and a writer taking over.
 *   - The eventfd mode (-DEVENTFD, below) is modelled for the data
 *     direction; the space and doorbell sites run the same code
 *     (wait.hpp notify_sleepers / block_until, events/arm.hpp).
 *   - At most one death per run, of rank DYING's first reader; one
 *     replacement.  The other ranks are alive, so the liveness check only
 *     looks at rank DYING (for the others it is a no-op), and it does not
 *     require that rank to hold the minimum head (the C++ checks only a
 *     lagging rank: the model allows more evictions, a superset).
 *     The liveness check runs after a return from the writer's futex_wait
 *     (C++: also in the spin phase; the model's next loop turn covers that).
 *   - The probe of the owner's pid (process_alive) is folded into E0: a dead
 *     process stays dead, and a claim between the load and the probe only
 *     makes E1's CAS fail.  The replacement's probe always finds the first
 *     reader dead (it runs only after the death).
 *   - The payload write is folded into the tail exchange's step (readers
 *     never look at or beyond tail); P1 is asserted at the room decision.
 *
 * PROPERTIES AND HOW THEY ARE CHECKED
 *   P1 no overwrite: when Writer::wait_for_space decides "room", assert that
 *      every rank with a live attached owner (ghost live_owner[r]: the first
 *      reader while alive, the replacement from its C1 on) has released the
 *      position that last used the slot (tail - head[r] < CAP; heads only
 *      grow, so this is the strictest moment); each reader asserts the payload
 *      it reads is its head position (order, no overwritten bytes).
 *   P2 every message delivered: a reader that sees Closed asserts head == M
 *      (a replacement that found its rank evicted excepted).
 *   P3 no lost wake-up, as an invariant over all reachable states:
 *        reader r queued on notify_seq while (tail > head[r] || closed)
 *          only while the writer is between that store and its wake
 *          (ghost pub_pending);
 *        writer queued on space_seq while it has room (over non-evicted
 *          ranks) only while some reader is between its head exchange and
 *          its wake (ghost rel_pending[r]) -- or a reader died there (ghost
 *          orphan_rel, until the writer's next 3a): the wake of a killed
 *          releaser is lost for good, and the writer's liveness timeout is
 *          what ends that sleep.
 *      It is asserted on every transition that can falsify it (see
 *      check_*_inv below) -- equivalent to a monitor process, without
 *      multiplying the state space.  It catches a lost wake-up even when a
 *      later publish or the close would repair it.
 *   P4 no deadlock / nobody asleep forever: pan's invalid-end-state check.
 *      There are no end labels (but the Killer's): only the closing `}` of
 *      each process is a valid end state, so a reader or the writer blocked
 *      in futex_wait when nothing else can run is an error.  -DNO_CLOSE: the
 *      writer never closes (an executor that publishes, then waits for
 *      replies) and readers stop after M messages; there a lost wake-up of the
 *      last message is a real hang, which pan finds with P3 disabled
 *      (-DNO_MONITOR).  With close, the unconditional wake in Writer::close
 *      and every later publish repair a lost data wake-up, which is why P3 is
 *      the primary check.
 *   P5 no livelock when futex_wait may return early: -DSPURIOUS compiled with
 *      -DNP, pan -l -f: no non-progress cycle under weak fairness (progress
 *      labels: a publish, a release).  Without early returns the state graph
 *      is acyclic (each loop iteration consumes a wake), so P4 is the whole
 *      story.
 *   P6 no leaked announcement (-DDEATH): once a new holder of rank r's role
 *      has cleared the rank's bit (C2 of a replacement, or E2 of an
 *      eviction; ghost fresh[r]), the writer's w2 never sees bit r set unless
 *      the rank's live owner announced it (ghost ann_live[r], set by 3a and
 *      cleared by the retract together with the bit).  Asserted at w2.
 *
 * EVENTFD MODE (-DEVENTFD; include/ringcast/events/eventfd.hpp, wait.hpp)
 *   Reader rank EFD_RANK (0) sleeps on its own eventfd, the other ranks on
 *   the futex word: a mixed set, as the writer meets it.  The eventfd is a
 *   counter efd[r] (non-zero = readable); the waiter's poll blocks while it
 *   is 0 (e_blocked[r], a queue of its own: a futex wake does not end it).
 *     3a' drain: efd[r] = 0 (read), BEFORE the announcement 3a; no 3c
 *     3e  poll: blocked while efd[r] == 0
 *     w3  (Writer::commit_record -> notify_sleepers, and Writer::close ->
 *         wake_all) notify_seq += 1, then in one step (EventfdSignaller::
 *         signal re-loads the bits): efd[r] = 1 for every announced eventfd
 *         rank (its poll returns); futex_wake unless every announced rank
 *         was an eventfd one.  (close: futex_wake always.)
 *   P3 covers both queues: a reader blocked on either while its data is
 *   there only while the writer is between publishing and its wake step.
 *
 * NEGATIVE SWITCHES (check.sh requires pan to report the expected error)
 *   BUG_NO_RECHECK        block_until (data) without 3d               -> P3 / P4
 *   BUG_W1_RELEASE_STORE  Writer::commit_record's w1 is a plain release
 *                         store: w2 (load of the announcement bits)
 *                         hoisted above it                            -> P3 / P4
 *   BUG_HEAD_RELEASE_STORE Reader::store_head's w1 is a plain release
 *                         store: w2 (load of writer_sleeping) hoisted  -> P3 / P4
 *   BUG_SPACE_NO_RECHECK  block_until (space) without 3d              -> P3 / P4
 *   BUG_ROOM_OFF_BY_ONE   room test lets CAP+1 messages be in flight  -> P1
 *   BUG_CLOSE_ORDER       ready() loads tail before closed            -> P2
 *   BUG_NO_CLEAR_ON_CLAIM the replacement skips C2                    -> P6
 *   BUG_NO_CLEAR_ON_EVICT the eviction skips E2                       -> P6
 *   BUG_CLAIM_CLEARS_WORD C2 stores 0 to the whole word of bits instead
 *                         of clearing its own bit (fetch_and): another
 *                         rank's announcement is lost                 -> P3
 *   BUG_EVICT_CHECK_THEN_STORE  the old separate words: the replacement
 *                         checks "not evicted", then CASes the pid, then
 *                         stores attached; the writer checks the owner is
 *                         dead, then stores evicted                   -> P1
 *   NO_LIVENESS_TIMEOUT   (with DEATH) the writer's futex_wait has no
 *                         timeout, so no liveness check runs          -> P4
 *   NO_MONITOR            drop the P3 assertions (to show P4 alone)
 *   BUG_DRAIN_AFTER_RECHECK (EVENTFD) the drain comes after the re-check
 *                         3d: a signal sent in between is eaten      -> P3
 *   BUG_SKIP_FUTEX_WAKE   (EVENTFD) the futex wake is skipped once any
 *                         eventfd was signalled: the futex rank beside
 *                         it sleeps on                                -> P3
 *   BUG_AHEAD_SKIPS_WAKE  (AHEAD) a publish after a wake-ahead skips its
 *                         own w2..w3, as if the readers woken ahead were
 *                         still awake: one that slept again sleeps on  -> P3
 *
 * WAKING AHEAD (-DAHEAD; Writer::wake_ahead, wait.hpp "Waking ahead")
 *   Before each message the writer may (or may not) run w2 and, if a bit
 *   is set, notify_seq += 1 and futex_wake -- no eventfd is written (an
 *   eventfd sleeper is not woken ahead).  A reader woken so finds nothing
 *   and spins (block_until's case 3g) before it announces again: that spin
 *   only repeats case 1, so it is abstracted like case 2 (back to the top).
 *   The publish then runs w1..w3 as always; P3 must hold with any number of
 *   wake-aheads anywhere, and the must-fail switch above shows that it is
 *   the publish's own wake that keeps it.
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
#if N < 1 || N > 8
#error "the model needs 1 <= N <= 8 (the announcement bits are one byte)"
#endif
#define DYING 0        /* the rank whose reader may die (-DDEATH) */
#define EFD_RANK 0     /* the rank that sleeps on an eventfd (-DEVENTFD) */
#ifdef EVENTFD
#define IS_EFD(r)     ((r) == EFD_RANK)
#else
#define IS_EFD(r)     0
#endif

/* owner word state (layout.hpp SlotState) and pid (layout.hpp Owner) */
#define ST_ATTACHED 1
#define ST_EVICTED  3
#define PID_FIRST   1  /* the rank's first reader */
#define PID_REPL    2  /* its replacement (-DDEATH) */

/* ---------------- shared memory ---------------- */
byte tail;             /* WriterLine.tail: published position, exchanged (seq_cst) by the writer only */
bit  closed;           /* SegmentHeader.flags: closed */
byte notify_seq;       /* WriterLine.notify_seq: futex word the readers sleep on */
byte sleep_bits;       /* ReaderSleepLine.sleeping[0]: bit r = rank r may be asleep on notify_seq */
byte space_seq;        /* SpaceLine.space_seq: futex word the writer sleeps on */
bit  writer_sleeping;  /* SpaceLine.writer_sleeping, bit 0 */
byte head[N];          /* ReaderSlot[r].head, exchanged (seq_cst) by rank r's reader only */
byte owner_state[N] = ST_ATTACHED;  /* ReaderSlot[r].owner: state ... */
byte owner_pid[N] = PID_FIRST;      /* ... and pid (one word in the C++) */
byte ring[CAP];        /* data ring: payload of the message held in each slot */

/* ---------------- kernel state ---------------- */
bit  r_blocked[N];     /* reader r is queued in futex_wait(&notify_seq) */
bit  e_blocked[N];     /* reader r is blocked in poll() on its eventfd (-DEVENTFD) */
bit  efd[N];           /* reader r's eventfd counter is non-zero (readable) */
bit  all_served;       /* scratch of the eventfd signal step */
bit  w_blocked;        /* the writer is queued in futex_wait(&space_seq) */
bit  dead;             /* rank DYING's first reader has been killed (what process_alive reports) */
bit  die_now;          /* the Killer's signal, taken by rank DYING's `unless` */

/* ---------------- ghost state (not in the C++) ---------------- */
bit  pub_pending;      /* writer is between a tail/closed store and its wake decision */
bit  rel_pending[N];   /* reader r is between its head exchange and its wake decision */
bit  orphan_rel;       /* a reader died between its head exchange and its wake decision */
bit  live_owner[N] = 1;/* rank r has a live attached owner (P1) */
bit  ann_live[N];      /* rank r's live owner has its announcement bit set (P6) */
bit  fresh[N];         /* a new holder of rank r (claim or eviction) cleared its bit (P6) */
byte inv_i, inv_m;     /* scratch for the checks, always 0 between steps */
bit  inv_a;

#define MIN2(a, b)    ((a) < (b) -> (a) : (b))
#define BIT(r)        (1 << (r))
#define ANNOUNCED_BIT(r) ((sleep_bits & BIT(r)) != 0)

/* The head the writer honours for rank r: min_reader_head_acquire skips an
 * evicted rank (it starts from tail).  The state load and the head load are
 * one step: in the correct design only the writer itself changes the state
 * of a rank (E1; a claim keeps "attached"). */
#define HEADV(r)      (owner_state[r] == ST_EVICTED -> tail : head[r])
/* min over ranks 0..i, i loaded in this step (mh holds ranks 0..i-1) */
#define NEXT_MIN(i)   ((i) == 0 -> HEADV(0) : MIN2(mh, HEADV(i)))

/* Writer::wait_for_space's room test for need = 1 message:
 * tail + need <= min_head + CAP. */
#ifdef BUG_ROOM_OFF_BY_ONE
#define ROOM(mh)      (tail + 1 - (mh) <= CAP + 1)
#else
#define ROOM(mh)      (tail + 1 - (mh) <= CAP)
#endif
#define TRUE_ROOM(mh) (tail + 1 - (mh) <= CAP)

/* P1, writer side: the slot of position tail (last used by position
 * tail - CAP) has been released by every rank with a live attached owner. */
#define check_no_overwrite()                                                \
    for (inv_i : 0 .. N-1) {                                                \
        assert(!live_owner[inv_i] || tail - head[inv_i] < CAP)              \
    };                                                                      \
    inv_i = 0

/* P6, at the writer's w2: no bit of a rank whose new holder cleared it is
 * set, unless that rank's live owner set it. */
#define check_no_leak()                                                     \
    for (inv_i : 0 .. N-1) {                                                \
        assert(!(fresh[inv_i] && ANNOUNCED_BIT(inv_i) && !ann_live[inv_i])) \
    };                                                                      \
    inv_i = 0

/* ---------------- P3: no lost wake-up, as an invariant ----------------
 * reader r:   r_blocked[r] && (tail > head[r] || closed)  =>  pub_pending
 * the writer: w_blocked && room                    =>  some rel_pending[r]
 *                                                      || orphan_rel
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
 * pending flag in the same step; an eviction, which also makes room, is the
 * writer's own step while it is not queued; a death that drops rel_pending
 * sets orphan_rel in the same step; orphan_rel drops only at the writer's 3a,
 * while it is not queued.)  -DNO_MONITOR removes these assertions, to show
 * what pan's deadlock check finds on its own. */
#define READER_OK(r)  (!((r_blocked[r] || e_blocked[r]) && (tail > head[r] || closed) && !pub_pending))
#ifdef NO_MONITOR
#define check_reader_inv(r)      skip
#define check_all_readers_inv()  skip
#define check_writer_inv()       skip
#else
#define check_reader_inv(r)      assert(READER_OK(r))
#define check_all_readers_inv()  for (inv_i : 0 .. N-1) { assert(READER_OK(inv_i)) }; inv_i = 0
#define check_writer_inv()                                                  \
    inv_m = 255; inv_a = orphan_rel;                                        \
    for (inv_i : 0 .. N-1) {                                                \
        inv_m = MIN2(inv_m, HEADV(inv_i));                                  \
        if :: rel_pending[inv_i] -> inv_a = 1 :: else fi                    \
    };                                                                      \
    assert(!(w_blocked && TRUE_ROOM(inv_m) && !inv_a));                     \
    inv_i = 0; inv_m = 0; inv_a = 0
#endif

/* Which futex_waits may return early (timeout, EINTR, spurious). */
#ifdef SPURIOUS
#define READER_TIMEOUT 1
#define WRITER_TIMEOUT 1
#else
#define READER_TIMEOUT 0
#if defined(DEATH) && !defined(NO_LIVENESS_TIMEOUT)
#define WRITER_TIMEOUT 1      /* the liveness_interval timeout of the space wait */
#else
#define WRITER_TIMEOUT 0
#endif
#endif

/* futex_wait(&word, val): compare-and-enqueue is one atomic step in the
 * kernel (done under the futex hash-bucket lock, as is futex_wake).
 * who: the caller, 0..N-1 a reader, N the writer (selects the P3 check).
 * early: 1 if this wait may return early (timeout / EINTR / spurious). */
inline futex_wait(word, val, blocked, who, early) {
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
    :: atomic { early && blocked -> blocked = 0 }  /* timeout / EINTR / spurious return */
    fi
}

/* 3e of an eventfd sleeper: poll() blocks while the counter is 0 (it does
 * not consume it: only the drain 3a' does). */
inline eventfd_wait(who, early) {
    atomic {
        if
        :: efd[who] == 0 -> e_blocked[who] = 1    /* nothing to read: block */
        :: else          -> skip                  /* readable: return at once */
        fi;
        check_reader_inv(who)
    };
    if
    :: !e_blocked[who] -> skip                    /* a write made it readable */
    :: atomic { early && e_blocked[who] -> e_blocked[who] = 0 }  /* timeout / EINTR */
    fi
}

/* w3's eventfd half (EventfdSignaller::signal, re-loading the bits): write
 * every announced eventfd rank's fd; all_served = no futex rank announced. */
inline signal_eventfds() {
    all_served = 1;
    for (inv_i : 0 .. N-1) {
        if
        :: ANNOUNCED_BIT(inv_i) && IS_EFD(inv_i) -> efd[inv_i] = 1; e_blocked[inv_i] = 0
        :: ANNOUNCED_BIT(inv_i) && !IS_EFD(inv_i) -> all_served = 0
        :: else -> skip
        fi
    };
    inv_i = 0
}

/* futex_wake(&notify_seq, all): dequeue every reader queued now */
inline futex_wake_readers() {
    for (inv_i : 0 .. N-1) { r_blocked[inv_i] = 0 };
    inv_i = 0
}

/* Reader::poll_acquire (the ready() of wait_for_data) loads closed, then
 * tail, then decides "have data or closed".  closed is loaded first
 * (acquire): if it reads 1, the tail loaded after it is final, so "no data and
 * closed" really means drained.  Each load is one step; the second load and
 * the decision on it are one step.  BUG_CLOSE_ORDER loads tail first. */
#ifdef BUG_CLOSE_ORDER
#define LOAD_FIRST    t = tail                              /* BUG: tail first ... */
#define AVAIL         (t > head[_pid] || closed)            /* ... closed may be newer than t */
#define LOAD_SECOND   c = closed
#else
#define LOAD_FIRST    c = closed                            /* load closed (acquire) */
#define AVAIL         (tail > head[_pid] || c)              /* load tail (acquire), decide */
#define LOAD_SECOND   t = tail
#endif

/* 3a / retract of reader _pid's announcement bit (ghost ann_live follows it) */
#define ANNOUNCE      sleep_bits = sleep_bits | BIT(_pid); ann_live[_pid] = 1
#define RETRACT       sleep_bits = sleep_bits & ~BIT(_pid); ann_live[_pid] = 0

/* Writer::commit_record w2: any announcement bit set?  After w1 (the tail
 * exchange); BUG_W1_RELEASE_STORE takes the value loaded before it. */
#ifdef BUG_W1_RELEASE_STORE
#define ANNOUNCED     sl
#else
#define ANNOUNCED     (sleep_bits != 0)
#endif

/* Reader::store_head w2: is writer_sleeping set?  Same, for
 * BUG_HEAD_RELEASE_STORE. */
#ifdef BUG_HEAD_RELEASE_STORE
#define WSLEEPING     ws
#else
#define WSLEEPING     writer_sleeping
#endif

/* The death of rank DYING's reader (SIGKILL), in one step: the kernel drops
 * it from the futex queue; its bit, head and owner word stay as they are. */
inline reader_dies() {
    die_now = 0; dead = 1;
    live_owner[_pid] = 0; ann_live[_pid] = 0;
    r_blocked[_pid] = 0;
    if :: rel_pending[_pid] -> orphan_rel = 1 :: else fi;
    rel_pending[_pid] = 0;
    s = 0; t = 0; c = 0; ws = 0
}

active [N] proctype Reader()              /* _pid 0..N-1 = reader rank */
{
    byte s;    /* notify_seq as loaded in 3c */
    byte t;    /* tail, as loaded by ready() */
    bit  c;    /* closed, as loaded by ready() */
    bit  ws;   /* writer_sleeping as loaded early (BUG_HEAD_RELEASE_STORE only) */
#ifdef DEATH
    bit  gave_up;     /* the replacement found its rank evicted */
    byte ow_s, ow_p;  /* the owner word as loaded by C0 */

    do
    :: {
#endif
    do
    ::
#ifdef NO_CLOSE
        if
        :: head[_pid] == M -> break       /* has all M messages: done (no close in this mode) */
        :: else
        fi;
#endif
        /* ===== Reader::wait_for_data -> block_until (data site) ===== */
        do
        ::  LOAD_FIRST;                                  /* case 1, ready(): load closed */
            if
            :: atomic { AVAIL -> LOAD_SECOND }; break    /* case 1: tail > my head or closed: return */
            :: atomic { !AVAIL -> t = 0; c = 0 }         /* case 1: nothing: go on */
            fi;
            /* case 2 (bounded spin re-checking case 1, in part on its steps (SpinLook),
               in full at its checkpoints and before it ends): abstracted, adds no behaviour */
#ifndef BUG_DRAIN_AFTER_RECHECK
            if
            :: IS_EFD(_pid) -> efd[_pid] = 0             /* 3a': drain the eventfd (read), before 3a */
            :: else -> skip
            fi;
#endif
            atomic { ANNOUNCE };                         /* 3a: fetch_or own bit (seq_cst); 3b: fence(seq_cst) */
            if
            :: !IS_EFD(_pid) -> s = notify_seq           /* 3c: s = notify_seq (acquire) */
            :: else -> skip                              /* (an eventfd sleeper needs no snapshot) */
            fi;
#ifndef BUG_NO_RECHECK
            LOAD_FIRST;                                  /* 3d: re-check ready(): load closed */
            if
            :: atomic { AVAIL -> LOAD_SECOND; s = 0 };   /* 3d: tail > my head or closed: */
               atomic { RETRACT };                       /* 3d: retract own bit (fetch_and), return */
               break
            :: atomic { !AVAIL -> t = 0; c = 0 }         /* 3d: nothing: go to sleep */
            fi;
#endif
#ifdef BUG_DRAIN_AFTER_RECHECK
            if
            :: IS_EFD(_pid) -> efd[_pid] = 0             /* BUG: drain after the re-check */
            :: else -> skip
            fi;
#endif
            if
            :: IS_EFD(_pid) -> eventfd_wait(_pid, READER_TIMEOUT)  /* 3e: poll(eventfd) */
            :: else -> futex_wait(notify_seq, s, r_blocked[_pid], _pid, READER_TIMEOUT) /* 3e: futex_wait(&notify_seq, s) */
            fi;
            atomic { RETRACT; s = 0 }                    /* 3f: retract own bit, back to the top */
        od;

        /* ===== caller of wait_for_data (peek / read): data or Closed,
         * decided on the (tail, closed) that ready() loaded ===== */
        if
        :: atomic { t > head[_pid] ->             /* data: */
               /* Reader::peek: the payload of the record at my head */
               assert(ring[head[_pid] % CAP] == head[_pid]); /* P1: in order, not overwritten */
               t = 0; c = 0 }
        :: atomic { t <= head[_pid] -> assert(c) };  /* returned without data: must be closed */
           break                                  /* Closed: drained, done */
        fi;

        /* ===== Reader::release -> Reader::store_head (publish_and_notify on the space site) ===== */
#ifdef BUG_HEAD_RELEASE_STORE
        ws = writer_sleeping;                     /* BUG: w2 (load writer_sleeping) before a plain release store of head */
#endif
progress_read:
        atomic { head[_pid]++; rel_pending[_pid] = 1 }  /* w1: head.exchange(new_head, seq_cst) */
        if
        :: WSLEEPING ->                           /* w2: writer_sleeping (seq_cst load) set */
            space_seq++;                          /* w3: space_seq += 1 */
            atomic {                              /* w3: futex_wake(&space_seq, all) */
                w_blocked = 0; rel_pending[_pid] = 0; ws = 0;
                check_writer_inv()
            }
        :: atomic { !WSLEEPING ->                 /* w2: not set: no syscall */
               rel_pending[_pid] = 0; ws = 0;
               check_writer_inv() }
        fi
    od;
#ifdef DEATH
    break                                         /* done reading (this incarnation) */
       } unless { atomic { die_now && _pid == DYING -> reader_dies() } };

    /* Only after the death of rank DYING's reader: this process is now its
     * replacement (another process, pid PID_REPL) attaching to the same rank.
     * ===== Reader::Reader (attach) of the replacement ===== */
#ifndef BUG_EVICT_CHECK_THEN_STORE
    do
    :: atomic { owner_state[_pid] == ST_EVICTED -> gave_up = 1 };  /* C0: load owner word: evicted: */
       break                                                        /* C0: Error(peer_dead): give up */
    :: atomic { owner_state[_pid] != ST_EVICTED ->                  /* C0: load owner word; */
           ow_s = owner_state[_pid]; ow_p = owner_pid[_pid] };      /* C0: its pid is dead (probe) */
       if
       :: atomic { owner_state[_pid] == ow_s && owner_pid[_pid] == ow_p ->  /* C1 CAS owner word: */
              owner_state[_pid] = ST_ATTACHED; owner_pid[_pid] = PID_REPL;   /* C1: -> {attached, my pid} */
              live_owner[_pid] = 1; ow_s = 0; ow_p = 0
#ifdef BUG_NO_CLEAR_ON_CLAIM
              ; fresh[_pid] = 1
#endif
          };
          break
       :: atomic { !(owner_state[_pid] == ow_s && owner_pid[_pid] == ow_p) ->
              ow_s = 0; ow_p = 0 }                                  /* C1 failed: reload (C0) */
       fi
    od;
#else
    /* BUG (the old code): the state and the pid are separate words */
    if
    :: atomic { owner_state[_pid] == ST_EVICTED -> gave_up = 1 }    /* old: load state: evicted: give up */
    :: atomic { owner_state[_pid] != ST_EVICTED -> skip }           /* old: load state: not evicted */
    fi;
    if
    :: gave_up -> skip
    :: else ->
       atomic { owner_pid[_pid] == PID_FIRST ->                     /* old claim_owner: CAS owner_pid, */
           owner_pid[_pid] = PID_REPL; live_owner[_pid] = 1 };      /*   dead holder -> me */
       owner_state[_pid] = ST_ATTACHED                              /* old: state = attached (plain store) */
    fi;
#endif
    if
    :: gave_up -> break
    :: else
    fi;
#if defined(BUG_CLAIM_CLEARS_WORD)
    atomic { sleep_bits = 0; fresh[_pid] = 1 }    /* BUG: C2 stores 0 to the whole word of bits */
#elif !defined(BUG_NO_CLEAR_ON_CLAIM)
    atomic { sleep_bits = sleep_bits & ~BIT(_pid); fresh[_pid] = 1 }  /* C2 clear own sleeping flag (seq_cst fetch_and) */
#endif
    /* head_ = the rank's head (acquire): the loop reads on from head[_pid] */
    od;
    assert(gave_up || head[_pid] == M)            /* P2: every message was delivered */
#else
    assert(head[_pid] == M)                       /* P2: every message was delivered */
#endif
}

/* The writer's liveness check (Writer::check_lagging_readers, run by
 * block_until's on_idle) with evict_dead_readers, for rank DYING. */
inline liveness_tick() {
#ifndef BUG_EVICT_CHECK_THEN_STORE
    if
    :: atomic { owner_state[DYING] == ST_ATTACHED && owner_pid[DYING] == PID_FIRST && dead -> /* E0: load owner word; */
           ow_s = owner_state[DYING]; ow_p = owner_pid[DYING] };                            /* E0: pid dead (probe) */
       if
       :: atomic { owner_state[DYING] == ow_s && owner_pid[DYING] == ow_p ->  /* E1 CAS owner word to evicted */
              owner_state[DYING] = ST_EVICTED; owner_pid[DYING] = 0; ow_s = 0; ow_p = 0
#ifdef BUG_NO_CLEAR_ON_EVICT
              ; fresh[DYING] = 1
#endif
          }
#ifndef BUG_NO_CLEAR_ON_EVICT
          ;
          atomic { sleep_bits = sleep_bits & ~BIT(DYING); fresh[DYING] = 1 }  /* E2 clear the evicted rank's sleeping flag */
#endif
       :: atomic { !(owner_state[DYING] == ow_s && owner_pid[DYING] == ow_p) ->
              ow_s = 0; ow_p = 0 }                                            /* E1 failed: claimed meanwhile */
       fi
    :: atomic { !(owner_state[DYING] == ST_ATTACHED && owner_pid[DYING] == PID_FIRST && dead) -> skip }
                                                                              /* E0: alive, evicted or claimed: nothing */
    fi
#else
    /* BUG (the old code): check that the owner is dead, then store evicted */
    if
    :: atomic { owner_state[DYING] != ST_EVICTED && owner_pid[DYING] == PID_FIRST && dead -> skip }
                                                  /* old: state != evicted; load owner_pid; dead (probe) */
       if
       :: atomic { owner_pid[DYING] == PID_FIRST -> skip };  /* old: owner_pid still the dead pid */
          owner_state[DYING] = ST_EVICTED                    /* old: state = evicted (plain store) */
       :: atomic { owner_pid[DYING] != PID_FIRST -> skip }   /* old: replaced meanwhile: nothing */
       fi
    :: atomic { !(owner_state[DYING] != ST_EVICTED && owner_pid[DYING] == PID_FIRST && dead) -> skip }
    fi
#endif
}

active proctype Writer()
{
    byte mh;   /* min head, as loaded so far */
    byte i;    /* reader index of the head load */
    byte s;    /* space_seq as loaded */
    bit  sl;   /* announcement bits != 0 as loaded early (BUG_W1_RELEASE_STORE only) */
#ifdef DEATH
    byte ow_s, ow_p;  /* the owner word as loaded by E0 */
#endif
#ifdef BUG_AHEAD_SKIPS_WAKE
    bit  woke_ahead;  /* this message's wake-ahead made a wake */
#define AHEAD_MARK woke_ahead = 1
#else
#define AHEAD_MARK skip
#endif

    do
    :: tail == M -> break                          /* all M messages published */
    :: else ->
#ifdef AHEAD
        /* ===== Writer::wake_ahead, before the message is made (or not) ===== */
        if
        :: skip                                    /* no wake-ahead for this message */
        :: atomic { sleep_bits != 0 -> check_no_leak() };  /* w2: an announcement bit set */
           notify_seq++;                           /* w3: notify_seq += 1 */
           atomic { futex_wake_readers(); AHEAD_MARK }  /* w3: futex_wake(&notify_seq, all); no eventfd */
        :: atomic { sleep_bits == 0 -> check_no_leak() }   /* w2: nobody announced: nothing */
        fi;
#endif
        /* ===== Writer::wait_for_space (need = 1 message) -> block_until (space site) ===== */
        do
        ::  do                                     /* case 1, ready(): min_reader_head_acquire */
            :: atomic { i < N-1 -> mh = NEXT_MIN(i); i++ }       /* load state and head of rank i */
            :: atomic { i == N-1 && ROOM(NEXT_MIN(i)) ->         /* load the last; tail+need <= min_head+CAP */
                   mh = 0; i = 0; check_no_overwrite() };
               goto have_room                                    /* case 1: return */
            :: atomic { i == N-1 && !ROOM(NEXT_MIN(i)) -> mh = 0; i = 0 }; /* case 1: no room */
               break
            od;
            atomic { writer_sleeping = 1; orphan_rel = 0 }  /* 3a: fetch_or writer_sleeping (seq_cst); 3b: fence */
            s = space_seq;                                  /* 3c: s = space_seq (acquire) */
#ifndef BUG_SPACE_NO_RECHECK
            do                                              /* 3d: re-check ready() */
            :: atomic { i < N-1 -> mh = NEXT_MIN(i); i++ }       /* 3d: load state and head of rank i */
            :: atomic { i == N-1 && ROOM(NEXT_MIN(i)) ->         /* 3d: load the last; room */
                   mh = 0; i = 0; s = 0; check_no_overwrite() };
               writer_sleeping = 0;                              /* 3d: retract (fetch_and), return */
               goto have_room
            :: atomic { i == N-1 && !ROOM(NEXT_MIN(i)) -> mh = 0; i = 0 }; /* 3d: still no room */
               break
            od;
#endif
            futex_wait(space_seq, s, w_blocked, N, WRITER_TIMEOUT); /* 3e: futex_wait(&space_seq, s) */
            atomic { writer_sleeping = 0; s = 0 }   /* 3f: retract, back to the top */
#ifdef DEATH
            ;
            if
            :: skip                                 /* on_idle: liveness_interval not yet over */
            :: liveness_tick()                      /* on_idle: Writer::check_lagging_readers */
            fi
#endif
        od;

have_room:
        /* ===== Writer::commit_record (publish_and_notify on the data site) ===== */
#ifdef BUG_W1_RELEASE_STORE
        sl = (sleep_bits != 0);                   /* BUG: w2 (load the bits) before a plain release store of tail */
#endif
        /* The payload bytes are written between wait_for_space's return and
         * w1; readers never look at or beyond tail, so the write is folded
         * into w1's step.  Whether the slot was free is asserted (P1) at the
         * room decision itself: heads only grow, so that is the strictest
         * moment; any later write time is then safe too. */
        atomic {
            ring[tail % CAP] = tail;              /* write the payload bytes into the ring */
            tail++; pub_pending = 1               /* w1: tail.exchange(new_tail, seq_cst) */
        };
progress_pub:
#ifdef BUG_AHEAD_SKIPS_WAKE
        if
        :: atomic { woke_ahead -> woke_ahead = 0; pub_pending = 0; check_all_readers_inv() }; goto published  /* BUG */
        :: atomic { !woke_ahead -> skip }
        fi;
#endif
        if
        :: atomic { ANNOUNCED -> check_no_leak() }; /* w2: an announcement bit set (seq_cst load) */
            notify_seq++;                         /* w3: notify_seq += 1 */
            atomic {                              /* w3: write the announced eventfds; futex_wake(&notify_seq, all) */
#ifdef EVENTFD
                signal_eventfds();
#ifdef BUG_SKIP_FUTEX_WAKE
                if :: efd[EFD_RANK] -> all_served = 1 :: else -> skip fi;  /* BUG: one eventfd served = all */
#endif
                if
                :: !all_served -> futex_wake_readers()  /* a futex rank announced */
                :: else -> skip                         /* all announced ranks had an eventfd: no futex wake */
                fi;
                all_served = 0;
#else
                futex_wake_readers();
#endif
                pub_pending = 0; sl = 0;
                check_all_readers_inv()
            }
        :: atomic { !ANNOUNCED ->                 /* w2: no bit set: no syscall */
               check_no_leak();
               pub_pending = 0; sl = 0;
               check_all_readers_inv() }
        fi
#ifdef BUG_AHEAD_SKIPS_WAKE
        ;
published:
        skip
#endif
    od;

#ifndef NO_CLOSE
    /* ===== Writer::close ===== */
    atomic { closed = 1; pub_pending = 1 };       /* Writer::close: flags.fetch_or(closed) */
    notify_seq++;                                 /* wake_all: fence(seq_cst); notify_seq += 1 */
    atomic {                                      /* wake_all: futex_wake(&notify_seq, all), unconditional */
#ifdef EVENTFD
        signal_eventfds(); all_served = 0;        /* wake_all: the announced eventfds too (bits loaded after its fence) */
#endif
        futex_wake_readers();
        pub_pending = 0;
        check_all_readers_inv()
    }
#endif
}

#ifdef DEATH
active proctype Killer()
{
end_kill:
    die_now = 1                                   /* SIGKILL rank DYING's reader, at any moment (or never) */
}
#endif
