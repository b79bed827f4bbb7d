/*
 * stamp.pml -- Promela model of the record stamps: what a reader that has
 * caught up with the writer finds when it polls the stamp word at its head
 * instead of the tail.
 * C++: include/ringcast/layout.hpp ("Stamps": the stamp word, rule Z),
 *      include/ringcast/detail/ring_inl.hpp (Writer::reserve_record's padding,
 *      Writer::clear_stamp_ahead, Writer::commit_record 2b,
 *      Reader::stamped_at_head, Reader::poll_acquire, Reader::record_at_head).
 * Checked by tests/model/check.sh. The sleep handshake is not modelled here:
 * the stamp only adds a way for poll_acquire to say "ready"; a full look that
 * finds no stamp still loads the tail (every re-check before a sleep, and each
 * checkpoint of a spin, whose other steps may look at the stamp alone:
 * SpinLook in wait.hpp), the cursor whose handshake
 * tests/model/ring.pml checks (a stamp is stored before that tail, so a
 * "ready" by stamp is never a record the tail would not have shown).
 *
 * WHAT IS MODELLED
 *   A ring of CAP cells (a cell = 16 bytes = one record header's size); a
 *   record is one header cell and 0 or 1 payload cells (-DCAP= -DM=; defaults
 *   3, 5; CAP >= 3: the C++ ring's largest record is a quarter of it). Every cell is seen as a header: its stamp word, its length (cells)
 *   and the message number it carries. One writer publishes M messages;
 *   N = 2 readers take every one, both polling stamps (rank 1 may lag behind:
 *   any interleaving).
 *     writer  per message: wait for room (t + pad + size <= min(head) + CAP);
 *             a record that does not fit before the ring's end goes after a
 *             padding record (its header written now, its stamp later);
 *             1 payload cells: bytes the sender chose -- here as hostile as it
 *               gets: 0, or a header stamped for this lap or the next;
 *             2 the header's length and message number;
 *             2b Z: stamp word at the record's end := 0 if no held reader
 *               still needs that cell (end + 1 <= min(head) + CAP); then the
 *               record's stamp; then the padding's stamp;
 *             3 tail := end.
 *     reader  waits until the stamp at its head is of its head's lap, or the
 *             tail passed its head; takes the record there (a padding record:
 *             on to the next lap's start); releases it (head := end).
 *
 * PROPERTIES (assertions)
 *   S1 what a reader takes is the next message, in order: never payload bytes
 *      (a forged header), never a record of an older lap.
 *   S2 whatever told a reader a record is at its head (its stamp or the
 *      tail), that record's stamp is there and of its lap.
 *   S3 no deadlock: every reader gets all M messages (invalid end states).
 *
 * WHAT IS ABSTRACTED AWAY
 *   Spin explores sequentially consistent interleavings: that Z's relaxed
 *   store and the record's plain stores are seen by whoever acquires the stamp
 *   is the release/acquire pair argued in ring_inl.hpp, not checked here (the
 *   order of the steps is: BUG_Z_AFTER_STAMP). Not modelled: a reservation
 *   given up (its padding header stays unstamped), fragments (records like
 *   any other here), the writer's cached free space (a lower bound: Z's
 *   check here reads the heads themselves), a writer's death and its
 *   successor's adoption (tests: Stamps.*, the publish_2_stamped crash
 *   points), a head released inside a record (ring_inl.hpp: Z clears a word
 *   there that passes for a stamp of its lap), and the sleep handshake
 *   (tests/model/ring.pml).
 *
 * MUST-FAIL VARIANTS (check.sh runs each)
 *   BUG_NO_ZERO_AHEAD   no Z: a caught-up reader takes old payload (S1)
 *   BUG_Z_AFTER_STAMP   Z after the record's stamp: a reader that takes the
 *                       record polls the old word before it is cleared (S1)
 *   BUG_NO_LAP          readers ignore the lap: a full ring's old record (S1)
 *   BUG_Z_ALWAYS        Z also when the ring is full: the lagging reader's
 *                       unread header is cleared (S2)
 */

#ifndef CAP
#define CAP 3
#endif
#ifndef M
#define M 5
#endif
#define N 2

#define KIND_MSG 1
#define KIND_PAD 2
#define FORGED 255
#define LAPS 8
#define LAP(pos) (((pos) / CAP) % LAPS)
#define STAMP(kind, pos) ((kind) + 4 * LAP(pos))
#define KIND(st) ((st) % 4)
#ifdef BUG_NO_LAP
#define CURRENT(st, pos) (KIND(st) != 0)
#else
#define CURRENT(st, pos) (KIND(st) != 0 && (st) / 4 == LAP(pos))
#endif

byte stamp[CAP];  /* RecordHeader::stamp at each cell: 0 or STAMP(kind, position) */
byte length[CAP];    /* RecordHeader::length, in cells (header included) */
byte msg[CAP];    /* the message number the record carries; FORGED: payload */
int tail = 0;     /* WriterLine::tail */
int head[N];      /* ReaderSlot::head */

#define HELD(x) ((x) <= head[0] + CAP && (x) <= head[1] + CAP)

active proctype writer() {
    int t = 0;  /* Writer::tail_ */
    byte m = 0, size, c;
    int pad, start, end;
    do
    :: m < M ->
        if :: size = 1 :: size = 2 fi;
        pad = CAP - t % CAP;
        if :: pad >= size -> pad = 0 :: else -> skip fi;
        HELD(t + pad + size);  /* wait_for_space: blocks until the readers moved on */
        start = t + pad;
        if
        :: pad > 0 -> length[t % CAP] = pad; msg[t % CAP] = FORGED  /* reserve_record: no stamp yet */
        :: else -> skip
        fi;
        c = 1;  /* 1: payload */
        do
        :: c < size ->
            if
            :: stamp[(start + c) % CAP] = 0
            :: stamp[(start + c) % CAP] = STAMP(KIND_MSG, start + c)
            :: stamp[(start + c) % CAP] = STAMP(KIND_MSG, start + c + CAP)
            fi;
            length[(start + c) % CAP] = 1;
            msg[(start + c) % CAP] = FORGED;
            c++
        :: else -> break
        od;
        length[start % CAP] = size;  /* 2 */
        msg[start % CAP] = m;
        end = start + size;
#if defined(BUG_Z_ALWAYS)
        stamp[end % CAP] = 0;
#elif !defined(BUG_NO_ZERO_AHEAD) && !defined(BUG_Z_AFTER_STAMP)
        if  /* 2b Z (clear_stamp_ahead) */
        :: HELD(end + 1) -> stamp[end % CAP] = 0
        :: else -> skip
        fi;
#endif
        /* The padding after its record only so that a reader taking it finds the
         * record at once: cell 0 of a lap always starts a record, so its old
         * stamp is one lap short either way (stamping the padding first passes
         * this model too). */
        stamp[start % CAP] = STAMP(KIND_MSG, start);
        if :: pad > 0 -> stamp[t % CAP] = STAMP(KIND_PAD, t) :: else -> skip fi;
#ifdef BUG_Z_AFTER_STAMP
        if
        :: HELD(end + 1) -> stamp[end % CAP] = 0
        :: else -> skip
        fi;
#endif
        tail = end;  /* 3 */
        t = end;
        m++
    :: else -> break
    od
}

active [N] proctype reader() {
    byte rank = _pid - 1, expect = 0, st;
    int h = 0;  /* Reader::head_ */
    do
    :: expect < M ->
        (CURRENT(stamp[h % CAP], h) || tail > h);  /* poll_acquire: stamp first, then the tail */
        st = stamp[h % CAP];
        assert(CURRENT(st, h));                     /* S2 */
        if
        :: KIND(st) == KIND_PAD ->
            assert(length[h % CAP] == CAP - h % CAP);
            h = h + CAP - h % CAP
        :: else ->
            assert(msg[h % CAP] == expect);          /* S1 */
            expect++;
            h = h + length[h % CAP]
        fi;
        head[rank] = h  /* store_head */
    :: else -> break
    od
}
