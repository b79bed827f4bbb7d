/*
 * gather.pml -- Promela model of a gather group's wait for replies whose
 * fragments do not all fit in the reply ring: the collector's doorbell
 * handshake against the workers' commits (and, with -DWAITV, the futex_waitv
 * method instead of the doorbell).
 * C++: include/ringcast/gather.hpp, src/gather.cpp (GatherCollector::collect,
 *      wait_any, GatherWorker), include/ringcast/wait.hpp (block_until 3a..3f,
 *      notify_sleepers w2..w3), include/ringcast/detail/ring_inl.hpp
 *      (Writer::wait_for_space, Writer::commit_record, Reader::peek's
 *      reassembly, Reader::store_head).
 * Checked by tests/model/check.sh; the handshake on one ring (readers and the
 * writer, announcement bits, dead readers) is tests/model/ring.pml.
 *
 * WHAT IS MODELLED
 *   K workers (ranks 0..K-1), each the writer of its own reply ring of CAP
 *   record slots; one collector, reader rank 0 of every reply ring, collecting
 *   ONE reply from every rank (-DK= -DCAP= -DF=; defaults 2, 1, 3).  Each
 *   worker's reply is F fragments (F > CAP: the reply does not fit in the
 *   ring, so the worker must wait for space in the middle of it); one fragment
 *   = one slot, and the payload of ring position p is p.
 *     worker  per fragment: Writer::wait_for_space (block_until on the reply
 *             ring's space site: case 1, 3a..3f), the fragment bytes, w1
 *             tail.exchange (seq_cst), the ring's own w2..w3 (its reader bit:
 *             only set by the -DWAITV collector), then the doorbell's w2..w3
 *             (commit_record's step 5: notify_sleepers on the publish bell
 *             that GatherWorker sets, collector_sleeping / doorbell_seq) --
 *             after EVERY fragment's commit, with the same exchange as w1.
 *     collector  collect(): drain every pending ring without waiting
 *             (peek(0): copy each fragment there is into the reassembly
 *             buffer and release it at once: store_head = w1 head.exchange,
 *             w2 load writer_sleeping, w3), a rank whose last fragment came is
 *             done; then ONE wait for "any pending ring has a record":
 *             wait_any -> block_until on the doorbell site:
 *               case 1 ready(); 3a fetch_or collector_sleeping; 3b fence;
 *               3c snapshot doorbell_seq; 3d re-check ready(); 3e futex_wait;
 *               3f retract; back to draining.
 *             -DWAITV: wait_any_waitv instead: 3a sets the collector's bit on
 *             every pending ring's data site, 3c snapshots every ring's
 *             notify_seq, 3e is one futex_waitv over all of them (sleeps only
 *             if every word still equals its snapshot), and the worker's own
 *             ring w2..w3 is what wakes it.
 *   ready() = GatherCollector::any_pending_ready: Reader::poll_acquire of each
 *   pending ring, one acquire load of tail per ring (one step each).  The
 *   closed flag is not modelled (workers do not close).
 *   futex_wait / futex_waitv / futex_wake are atomic in the kernel, as in
 *   ring.pml; none of them returns early here (but for -DALARM's alarms, below; no timeouts: the liveness
 *   interval's timeout would turn a lost wake-up into a stall of up to one
 *   liveness_interval, which the model must not hide).
 *
 * MEMORY MODEL
 *   As ring.pml: spin explores sequentially consistent interleavings, which
 *   is what the seq_cst operations of each pair guarantee (w1 a seq_cst RMW,
 *   w2 a seq_cst load; 3a a seq_cst RMW, 3b a seq_cst fence).  The worker's
 *   doorbell w2 uses the reply ring's tail exchange as its w1 (wait.hpp
 *   notify_sleepers).
 *
 * PROPERTIES
 *   P1 payload: the collector asserts every fragment it copies is the one at
 *      its head (in order, not overwritten).
 *   P2 every reply complete: the collector ends with head[w] == F for all w.
 *   P3 no lost wake-up, as invariants (asserted on the transitions that can
 *      falsify them, as in ring.pml):
 *        collector queued (doorbell / futex_waitv) while some ring has a
 *          record (tail[w] > head[w]) only while that ring's worker is between
 *          its tail exchange and its wake decision (ghost wake_pending[w]);
 *        worker w queued on its space_seq while its ring has room only while
 *          the collector is between its head exchange of that ring and its
 *          wake decision (ghost rel_pending[w]).
 *   P4 no deadlock: pan's invalid-end-state check (no end labels).
 *
 * NEGATIVE SWITCHES (check.sh requires pan to report the expected error)
 *   BUG_BELL_AFTER_LAST_FRAGMENT  the worker runs the doorbell's w2..w3 only
 *                        after the last fragment of a reply (once write()
 *                        returns: the old GatherWorker::reply) -- the worker
 *                        fills the ring and waits for space while the
 *                        collector sleeps on the bell                 -> P3 / P4
 *   BUG_COLLECTOR_NO_RECHECK  wait_any without 3d                     -> P3 / P4
 *                        (also with -DALARM: the predicted waits' alarms end sleeps early and
 *                        does not hide the lost wake-up)
 *   NO_MONITOR           drop the P3 assertions (to show P4 alone)
 */

#ifndef K
#define K 2            /* workers */
#endif
#ifndef CAP
#define CAP 1          /* reply ring capacity, in fragments */
#endif
#ifndef F
#define F 3            /* fragments per reply */
#endif
#if K < 1 || K > 4
#error "the model needs 1 <= K <= 4"
#endif

#define BIT(w)        (1 << (w))
#define ROOM(w)       (tail[w] + 1 - head[w] <= CAP)   /* Writer::wait_for_space: tail + need <= head + CAP */

/* ---------------- shared memory ---------------- */
byte tail[K];          /* reply ring w: WriterLine.tail, exchanged by worker w */
byte head[K];          /* reply ring w: ReaderSlot[0].head, exchanged by the collector */
byte ring[K*CAP];      /* reply ring w's slots: ring[w*CAP + p % CAP] */
byte space_seq[K];     /* reply ring w: SpaceLine.space_seq (worker w sleeps on it) */
bit  writer_sleeping[K]; /* reply ring w: SpaceLine.writer_sleeping */
byte notify_seq[K];    /* reply ring w: WriterLine.notify_seq (-DWAITV: the collector sleeps on it) */
bit  reader_bit[K];    /* reply ring w: ReaderSleepLine bit 0, the collector's (-DWAITV) */
byte doorbell_seq;     /* DoorbellLine.doorbell_seq */
bit  collector_sleeping; /* DoorbellLine.collector_sleeping, bit 0 */

/* ---------------- kernel state ---------------- */
bit  c_blocked;        /* the collector is queued (futex_wait on the bell / futex_waitv) */
#ifdef ALARM
#ifndef ALARMS
#define ALARMS 2       /* the first wait's alarm and the later waits' window (gather.cpp) */
#endif
byte alarms_left = ALARMS;  /* a predicted wait's sleep may end by its alarm */
#endif
bit  w_blocked[K];     /* worker w is queued in futex_wait(&space_seq[w]) */

/* ---------------- ghost state (not in the C++) ---------------- */
bit  wake_pending[K];  /* worker w is between a tail exchange and its wake decision */
bit  rel_pending[K];   /* the collector is between a head exchange of ring w and its wake decision */
byte inv_i;            /* scratch for the checks, always 0 between steps */
bit  inv_a, inv_b;

/* ---------------- P3 as invariants (see ring.pml) ----------------
 * collector: c_blocked && some tail[w] > head[w]  =>  some wake_pending[w]
 *   (only a pending rank can have a record: each worker sends one reply)
 * worker w:  w_blocked[w] && ROOM(w)             =>  rel_pending[w]
 * Asserted when a party gets queued and when a pending flag drops. */
#ifdef NO_MONITOR
#define check_collector_inv()  skip
#define check_worker_inv(w)    skip
#else
#define check_collector_inv()                                               \
    inv_a = 0; inv_b = 0;                                                   \
    for (inv_i : 0 .. K-1) {                                                \
        if :: tail[inv_i] > head[inv_i] -> inv_a = 1 :: else fi;            \
        if :: wake_pending[inv_i] -> inv_b = 1 :: else fi                   \
    };                                                                      \
    assert(!(c_blocked && inv_a && !inv_b));                                \
    inv_i = 0; inv_a = 0; inv_b = 0
#define check_worker_inv(w)    assert(!(w_blocked[w] && ROOM(w) && !rel_pending[w]))
#endif

active [K] proctype Worker()             /* _pid 0..K-1 = worker rank */
{
    byte f;    /* fragments published */
    byte s;    /* space_seq as loaded in 3c */

    do
    :: f == F -> break                    /* the whole reply is published */
    :: else ->
        /* ===== Writer::wait_for_space -> block_until (space site of my reply ring) ===== */
        do
        :: atomic { ROOM(_pid) -> skip }; break           /* case 1: load head; room: return */
        :: atomic { !ROOM(_pid) -> skip };                /* case 1: no room */
           writer_sleeping[_pid] = 1;                     /* 3a: fetch_or writer_sleeping (seq_cst); 3b: fence */
           s = space_seq[_pid];                           /* 3c: s = space_seq (acquire) */
           if
           :: atomic { ROOM(_pid) -> s = 0 };             /* 3d: re-check: room: */
              writer_sleeping[_pid] = 0;                  /* 3d: retract, return */
              break
           :: atomic { !ROOM(_pid) -> skip }              /* 3d: still no room */
           fi;
           atomic {                                       /* 3e: futex_wait(&space_seq, s) */
               if
               :: space_seq[_pid] == s -> w_blocked[_pid] = 1
               :: else
               fi;
               check_worker_inv(_pid)
           };
           !w_blocked[_pid];                              /* 3e: dequeued by a futex_wake (or never queued) */
           atomic { writer_sleeping[_pid] = 0; s = 0 }    /* 3f: retract, back to the top */
        od;

        /* ===== Writer::commit_record of fragment f (write() -> fragment loop) ===== */
        atomic {
            ring[_pid*CAP + tail[_pid] % CAP] = tail[_pid]; /* the fragment's bytes and record header */
            tail[_pid]++; wake_pending[_pid] = 1            /* w1: tail.exchange(new_tail, seq_cst) */
        };
        /* the ring's own w2..w3 (publish_and_notify on its data site) */
        if
        :: atomic { reader_bit[_pid] -> skip };         /* w2: the collector's bit set (only -DWAITV) */
           notify_seq[_pid]++;                          /* w3: notify_seq += 1 */
           atomic {                                     /* w3: futex_wake(&notify_seq, all) */
               c_blocked = 0;
#ifdef WAITV
               wake_pending[_pid] = 0; check_collector_inv()
#endif
           }
        :: atomic { !reader_bit[_pid] ->                /* w2: no bit: no syscall */
#ifdef WAITV
               wake_pending[_pid] = 0; check_collector_inv()
#else
               skip
#endif
           }
        fi;
        /* Writer::commit_record step 5: the publish bell's w2..w3 (notify_sleepers), after this commit */
#ifdef BUG_BELL_AFTER_LAST_FRAGMENT
        if
        :: f < F-1 ->                                   /* BUG: not the last fragment: no doorbell check */
#ifndef WAITV
           atomic { wake_pending[_pid] = 0; check_collector_inv() }
#else
           skip
#endif
        :: else ->
#endif
        if
        :: atomic { collector_sleeping -> skip };       /* w2: collector_sleeping set (seq_cst load) */
           doorbell_seq++;                              /* w3: doorbell_seq += 1 */
           atomic {                                     /* w3: futex_wake(&doorbell_seq, all) */
               c_blocked = 0;
#ifndef WAITV
               wake_pending[_pid] = 0; check_collector_inv()
#endif
           }
        :: atomic { !collector_sleeping ->              /* w2: not set: no syscall */
#ifndef WAITV
               wake_pending[_pid] = 0; check_collector_inv()
#else
               skip
#endif
           }
        fi
#ifdef BUG_BELL_AFTER_LAST_FRAGMENT
        fi
#endif
        ;
        f++
    od
}

/* GatherCollector::any_pending_ready: one acquire load of tail per pending
 * ring (one step each); rdy = 1 if one of them has a record. */
inline any_ready() {
    do
    :: atomic { w < K && (pending & BIT(w)) && tail[w] > head[w] -> rdy = 1; w = 0 }; break
    :: atomic { w < K && !((pending & BIT(w)) && tail[w] > head[w]) -> w++ }
    :: atomic { w == K -> w = 0 }; break
    od
}

/* 3e ends: a futex_wake dequeued the collector (or it never queued). With -DALARM a sleep of the
 * collect may also end by its own timeout, ALARMS times in all, each at any moment: the first wait's
 * alarm (the predicted wait of wait.hpp: sleep until shortly before the expected reply, then spin)
 * and the later waits' shared window (SpinHistory::stop_predicting: sleep until shortly before the
 * last reply predicted from the spread), after which the collector drains and waits again. An alarm
 * must not be what delivers a reply: P3 is asserted when the collector queues, and once the alarms
 * are spent nothing else ends a sleep. */
#ifdef ALARM
#define DEQUEUED()                                                              \
    if                                                                          \
    :: !c_blocked -> skip                                                       \
    :: atomic { c_blocked && alarms_left > 0 -> c_blocked = 0; alarms_left-- }  \
    fi
#else
#define DEQUEUED() !c_blocked
#endif

active proctype Collector()
{
    byte pending = BIT(K) - 1;  /* ranks still owing their reply */
    byte w;                     /* rank being looked at */
    bit  rdy;                   /* result of any_ready() */
    byte s;                     /* doorbell_seq as loaded in 3c */
    byte snap[K];               /* -DWAITV: each ring's notify_seq as loaded in 3c */

    do
    ::
        /* ===== collect(): drain every pending ring, without waiting ===== */
        do
        :: w == K -> w = 0; break
        :: w < K && !(pending & BIT(w)) -> w++
        :: w < K && (pending & BIT(w)) ->
            /* Reader::peek(0): a record at my head (seen by its stamp or the tail) */
            if
            :: atomic { tail[w] > head[w] ->        /* a fragment at my head: copy it out */
                   assert(ring[w*CAP + head[w] % CAP] == head[w]) }  /* P1: in order, not overwritten */
               /* Reader::store_head: release the fragment at once */
               atomic { head[w]++; rel_pending[w] = 1 };  /* w1: head.exchange(new_head, seq_cst) */
               if
               :: writer_sleeping[w] ->                   /* w2: writer_sleeping (seq_cst load) set */
                  space_seq[w]++;                         /* w3: space_seq += 1 */
                  atomic {                                /* w3: futex_wake(&space_seq, all) */
                      w_blocked[w] = 0; rel_pending[w] = 0;
                      check_worker_inv(w);
                      if :: head[w] == F -> pending = pending & ~BIT(w); w++ :: else fi
                  }
               :: atomic { !writer_sleeping[w] ->         /* w2: not set: no syscall */
                      rel_pending[w] = 0;
                      check_worker_inv(w);
                      if :: head[w] == F -> pending = pending & ~BIT(w); w++ :: else fi
                  }                                       /* last fragment: the reply is complete */
               fi
            :: atomic { tail[w] <= head[w] -> w++ }       /* nothing there (timed_out): next rank */
            fi
        od;
        if
        :: pending == 0 -> break                          /* every rank answered */
        :: else
        fi;

#ifndef WAITV
        /* ===== wait_any -> block_until (doorbell site) ===== */
        any_ready();                                      /* case 1: ready() */
        if
        :: rdy -> rdy = 0; goto drained                   /* case 1: a record: drain */
        :: else
        fi;
        /* case 2 (bounded spin): abstracted */
        collector_sleeping = 1;                           /* 3a: fetch_or collector_sleeping (seq_cst); 3b: fence */
        s = doorbell_seq;                                 /* 3c: s = doorbell_seq (acquire) */
#ifndef BUG_COLLECTOR_NO_RECHECK
        any_ready();                                      /* 3d: re-check ready() */
        if
        :: rdy -> rdy = 0; s = 0;
           collector_sleeping = 0;                        /* 3d: retract, return ready */
           goto drained
        :: else
        fi;
#endif
        atomic {                                          /* 3e: futex_wait(&doorbell_seq, s) */
            if
            :: doorbell_seq == s -> c_blocked = 1
            :: else
            fi;
            check_collector_inv()
        };
        DEQUEUED();                                       /* 3e: dequeued by a futex_wake (or never queued) */
        atomic { collector_sleeping = 0; s = 0 }          /* 3f: retract; ready() at the top */
#else
        /* ===== wait_any_waitv (the same block_until steps over every pending ring) ===== */
        any_ready();                                      /* case 1: ready() */
        if
        :: rdy -> rdy = 0; goto drained
        :: else
        fi;
        do                                                /* 3a: fetch_or my bit on every pending ring (seq_cst) */
        :: atomic { w < K -> if :: pending & BIT(w) -> reader_bit[w] = 1 :: else fi; w++ }
        :: atomic { w == K -> w = 0 }; break
        od;
        /* 3b: fence(seq_cst) */
        do                                                /* 3c: snapshot each pending ring's notify_seq */
        :: atomic { w < K -> if :: pending & BIT(w) -> snap[w] = notify_seq[w] :: else fi; w++ }
        :: atomic { w == K -> w = 0 }; break
        od;
#ifndef BUG_COLLECTOR_NO_RECHECK
        any_ready();                                      /* 3d: re-check ready() */
        if
        :: rdy -> rdy = 0;
           atomic {                                       /* 3d: retract my bits, return ready */
               for (w : 0 .. K-1) { reader_bit[w] = 0; snap[w] = 0 }; w = 0
           };
           goto drained
        :: else
        fi;
#endif
        atomic {                                          /* 3e: futex_waitv(every pending notify_seq, snapshots) */
            inv_a = 1;
            for (w : 0 .. K-1) {
                if :: (pending & BIT(w)) && notify_seq[w] != snap[w] -> inv_a = 0 :: else fi
            };
            w = 0;
            if
            :: inv_a -> c_blocked = 1
            :: else
            fi;
            inv_a = 0;
            check_collector_inv()
        };
        DEQUEUED();                                       /* 3e: dequeued by a futex_wake on any of them */
        atomic {                                          /* 3f: retract my bits */
            for (w : 0 .. K-1) { reader_bit[w] = 0; snap[w] = 0 }; w = 0
        }
#endif
drained:
        skip
    od;
    for (w : 0 .. K-1) { assert(head[w] == F) }            /* P2: every reply complete */
}
