/*
 * arm.pml -- Promela model of an event loop's wait on one endpoint: the arm
 * (drain, announce, re-check) of a WaitSet member whose sleep is the loop's
 * (epoll on the endpoint's eventfd), with the two things that act on the
 * same announcement bit and eventfd besides the writer: the endpoint's own
 * blocking call made between two waits, and cancel().
 * C++: include/ringcast/events/arm.hpp (arm_eventfd), src/events/waitset.cpp
 *      (WaitSet::wait: (1) re-announce the armed members, (2) arm the others,
 *      (3)-(5) the woken), src/ring.cpp (Reader::cancel), include/ringcast/
 *      wait.hpp (announce, retract, publish_and_notify, the blocking call's
 *      3a..3f). Checked by tests/model/check.sh.
 *
 * WHAT IS MODELLED
 *   One reader endpoint in a WaitSet; its loop takes M messages and, with
 *   -DCANCEL, stops once it sees the cancel (it may see it before, between or
 *   after the messages). Shared state: data (messages published), bit (the
 *   endpoint's announcement bit, the one its own blocking calls use too),
 *   efd (the eventfd is readable), cancelled (the flag).
 *     writer     per message: data++ (w1, the seq_cst exchange); if bit:
 *                efd := 1 (w2..w3: the eventfd write of EventfdSignaller).
 *     canceller  (-DCANCEL) cancelled := 1; then efd := 1 (the poke).
 *     loop       wait(): (1) an armed member: bit := 1 again, re-check;
 *                (2) one not armed: efd := 0 (3a'), bit := 1 (3a), re-check
 *                (3d: cancelled, or a message there) -- ready: bit := 0, no
 *                sleep; else armed. Then sleep until efd (epoll); woken:
 *                bit := 0 (3f), look (ready: report), else arm again.
 *                A reported member is consumed: every message there taken,
 *                or the cancel seen. A wait may also time out (twice at most)
 *                with nothing reported: the member stays armed into the next
 *                wait(), as after wait(10ms). Between two waits, with -DOWN_CALL, the
 *                endpoint's own blocking call may run, once or more: 3a'
 *                (efd := 0: it sleeps on the same eventfd), 3a (bit := 1), 3d (takes what is there), then it returns and
 *                withdraws (bit := 0) -- a call that timed out or found data.
 *
 * PROPERTIES
 *   A1 no lost wake, no lost cancel: the loop always ends -- every message
 *      taken and, with CANCEL, the cancel seen (invalid end states).
 *
 * WHAT IS ABSTRACTED AWAY
 *   Spin explores sequentially consistent interleavings: the seq_cst RMWs
 *   and fences (3b, w1) that make the C++ behave so are argued in wait.hpp
 *   and checked for the futex and eventfd sleeps in ring.pml. The WaitSet's
 *   periodic re-check (every `recheck`) is left out on purpose: it bounds a
 *   lost wake to one interval, and the protocol must not need it. The io_uring
 *   back end's FUTEX_WAIT sleep is ring.pml's futex sleep (3c/3e); its
 *   announcement is the same bit, re-announced the same way.
 *
 * MUST-FAIL VARIANTS (check.sh runs each)
 *   BUG_ARM_IGNORES_CANCEL  the arm's re-check looks at the data only (the
 *                           code before this model): its drain eats a poke
 *                           made before it, and the loop sleeps past the
 *                           cancel (A1)
 *   BUG_POKE_BEFORE_FLAG    cancel() pokes, then stores the flag: the arm
 *                           drains the poke and reads the old flag (A1)
 *   BUG_NO_REANNOUNCE       wait() does not re-announce its armed member:
 *                           the own call's withdrawal leaves the bit clear,
 *                           the writer wakes nobody (A1, with OWN_CALL)
 */

#ifndef M
#define M 2
#endif

byte data = 0;      /* messages published */
byte taken = 0;     /* messages the endpoint took (loop or own call) */
bit  bit_set = 0;   /* the announcement bit */
bit  efd = 0;       /* the eventfd is readable */
bit  cancelled = 0;
bit  seen_cancel = 0;
bit  armed = 0;     /* the WaitSet's view: announced, its fd watched */
bit  ready = 0;     /* scratch: the re-check's verdict */

#ifdef CANCEL
#define CANCEL_DONE (seen_cancel)
#else
#define CANCEL_DONE (1)
#endif

/* 3d of the arm: the flag, then the condition (arm_eventfd). */
inline recheck() {
#ifdef BUG_ARM_IGNORES_CANCEL
    ready = (data > taken)
#else
    ready = (cancelled || data > taken)
#endif
}

/* What the loop does with a reported member: take every message there, or
 * see the cancel (a cancelled read returns Status::cancelled). */
inline consume() {
    atomic {
        if
        :: cancelled -> seen_cancel = 1
        :: else -> skip
        fi;
        taken = data
    }
}

active proctype writer() {
    byte i = 0;
    do
    :: i < M ->
        data++;                                         /* w1 */
        if :: bit_set -> efd = 1 :: else -> skip fi;    /* w2..w3: the eventfd write */
        i++
    :: else -> break
    od
}

#ifdef CANCEL
active proctype canceller() {
#ifdef BUG_POKE_BEFORE_FLAG
    efd = 1;
    cancelled = 1
#else
    cancelled = 1;                                      /* seq_cst store */
    efd = 1                                             /* then the poke */
#endif
}
#endif

active proctype loop() {
    byte timeouts = 0;  /* waits that timed out (bounded: a finite search) */
    do
    :: taken == M && CANCEL_DONE -> break
    :: else ->
#ifdef OWN_CALL
        /* the endpoint's own blocking call between two waits (any number) */
        do
        :: efd = 0;                                     /* its 3a' (add() registered the eventfd) */
           bit_set = 1;                                 /* its 3a */
           if                                           /* 3d: takes what is there, or */
           :: data > taken -> taken = data              /* returns cancelled */
           :: else -> if :: cancelled -> seen_cancel = 1 :: else -> skip fi
           fi;
           bit_set = 0                                  /* returns: withdraws (3d / 3f) */
        :: break
        od;
        if :: taken == M && CANCEL_DONE -> break :: else -> skip fi;
#endif
        /* WaitSet::wait (1): the armed member announced again, re-checked */
        if
#ifndef BUG_NO_REANNOUNCE
        :: armed ->
            bit_set = 1;
            recheck();
            if :: ready -> bit_set = 0; armed = 0 :: else -> skip fi
#endif
        :: else -> ready = 0
        fi;
        /* (2) the member not armed: arm_eventfd */
        if
        :: !armed && !ready ->
            efd = 0;                                    /* 3a' drain */
            bit_set = 1;                                /* 3a announce (3b: SC) */
            recheck();                                  /* 3d */
            if :: ready -> bit_set = 0 :: else -> armed = 1 fi
        :: else -> skip
        fi;
        /* the kernel wait, then the woken member: 3f, look, re-arm; or the
         * wait's timeout (wait(10ms) returned nothing: the member stays armed) */
        do
        :: ready -> break
        :: !ready && timeouts < 2 -> timeouts++; goto next_wait
        :: !ready ->
            efd == 1;                                   /* epoll_wait: the fd readable */
            bit_set = 0; armed = 0;                     /* 3f */
            recheck();
            if
            :: ready -> skip
            :: else ->                                  /* arm again */
                efd = 0; bit_set = 1; recheck();
                if :: ready -> bit_set = 0 :: else -> armed = 1 fi
            fi
        od;
        consume();
next_wait:
        skip
    od;
end_loop:
    skip
}
