// Tests of every `ringcast` subcommand (tools/ringcast_cli.cpp) on real segments. Each test works only
// on names with its own prefix (ls/gc --prefix), so segments of concurrently running programs are
// never listed nor collected.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cli/cli_util.hpp"
#include "inspect.hpp"
#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

RunResult cli(std::vector<std::string> args, const RunOptions& options = {}) {
    args.insert(args.begin(), RINGCAST_CLI);
    return run_program(args, options);
}

bool shm_exists(const std::string& name) { return ::access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

// A per-test prefix: "rc-cli-<pid>-<test>-".
std::string prefix_for(const char* test) { return "rc-cli-" + std::to_string(::getpid()) + "-" + test + "-"; }

// A non-ringcast shm object (random bytes), removed at scope exit.
struct ForeignFile {
    std::string name;
    explicit ForeignFile(std::string n) : name(std::move(n)) {
        std::ofstream f("/dev/shm/" + name, std::ios::binary);
        const std::string junk(4096, 'x');
        f << junk;
    }
    ~ForeignFile() { ::unlink(("/dev/shm/" + name).c_str()); }
};

// A segment whose creator process is gone (created in a child that exited): abandoned.
void create_in_dead_child(const std::string& name) {
    const pid_t pid = fork_child([&] { (void)Segment::create(name, SegmentOptions{.readers = 2, .capacity = 64 << 10}); });
    ASSERT_EQ(wait_child(pid, 30s), 0);
}

// Attaches `rank` in a child that is then SIGKILLed: the slot keeps a dead owner.
void attach_in_killed_child(const std::string& name, std::uint32_t rank) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    const pid_t pid = fork_child([&] {
        auto r = Reader::attach(name, rank);
        const char c = 1;
        (void)!::write(p[1], &c, 1);
        for (;;) ::pause();
    });
    char c = 0;
    ASSERT_EQ(::read(p[0], &c, 1), 1);
    ::close(p[0]);
    ::close(p[1]);
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_child(pid, 30s), -SIGKILL);
}

// The JSON checks need python3: missing, they fail (tools/test installs it), never pass unchecked.
bool python_ok() {
    const bool ok = std::system("python3 -c 'import json' >/dev/null 2>&1") == 0;
    EXPECT_TRUE(ok) << "python3 is missing: the --json output cannot be checked (apt install python3)";
    return ok;
}

// Checks that `json` is valid JSON and that the Python expression `expr` over it (as `d`) is true.
bool json_check(const std::string& json, const std::string& expr) {
    char path[] = "/tmp/rc-cli-json-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return false;
    (void)!::write(fd, json.data(), json.size());
    ::close(fd);
    ::setenv("RC_JSON_EXPR", expr.c_str(), 1);  // no shell quoting of the expression
    const std::string cmd = std::string("python3 -c 'import json,os,sys; d=json.load(open(sys.argv[1])); "
                                        "sys.exit(0 if eval(os.environ[\"RC_JSON_EXPR\"]) else 1)' ") + path;
    const int rc = std::system(cmd.c_str());
    ::unlink(path);
    return rc == 0;
}

TEST(CliLs, ListsRingcastSegmentsWithOwnerSizeReadersAndLiveness) {
    const std::string prefix = prefix_for("ls");
    const std::string live = prefix + "live", dead = prefix + "dead";
    auto w = Writer::create(live, SegmentOptions{.readers = 2, .capacity = 64 << 10});
    auto r = Reader::attach(live, 0);
    create_in_dead_child(dead);
    ForeignFile foreign(prefix + "foreign");

    const RunResult res = cli({"ls", "--prefix", prefix});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    std::string live_line, dead_line;
    std::size_t pos = 0;
    while (pos < res.out.size()) {
        const std::size_t end = res.out.find('\n', pos);
        const std::string line = res.out.substr(pos, end - pos);
        if (line.rfind(live, 0) == 0) live_line = line;
        if (line.rfind(dead, 0) == 0) dead_line = line;
        pos = end == std::string::npos ? res.out.size() : end + 1;
    }
    EXPECT_EQ(res.out.find("foreign"), std::string::npos) << "a non-ringcast file was listed:\n" << res.out;
    ASSERT_FALSE(live_line.empty()) << res.out;
    ASSERT_FALSE(dead_line.empty()) << res.out;
    EXPECT_NE(live_line.find(" root "), std::string::npos) << live_line;  // owner (tests run as root or the same user)
    EXPECT_NE(live_line.find(" 0600 "), std::string::npos) << live_line;
    EXPECT_NE(live_line.find(" 1/2 "), std::string::npos) << "live readers / ranks: " << live_line;
    EXPECT_NE(live_line.find(std::to_string(::getpid()) + " (alive)"), std::string::npos) << live_line;
    EXPECT_NE(live_line.find(" open"), std::string::npos) << live_line;
    EXPECT_NE(dead_line.find("(dead)"), std::string::npos) << dead_line;
    EXPECT_NE(dead_line.find("abandoned"), std::string::npos) << dead_line;
    Segment::remove(dead);

    const RunResult js = cli({"ls", "--json", "--prefix", prefix});
    ASSERT_EQ(js.exit_code, 0) << js.err;
    if (python_ok()) {
        const std::string want = "len(d)==1 and d[0]['name']=='" + live + "' and d[0]['readers']==2 and "
                                 "d[0]['live_readers']==1 and d[0]['creator_alive'] and d[0]['size']==" +
                                 std::to_string(w.segment().size()) + " and not d[0]['abandoned']";
        EXPECT_TRUE(json_check(js.out, want)) << js.out;
    }
}

// Names may be 200 characters long: the columns of `ls` are as wide as their data, so every row lines
// up with the header whatever the names' lengths (a fixed 32-character NAME column pushed the rest of
// a long name's row to the right).
TEST(CliLs, ColumnsLineUpForNamesUpTo200Characters) {
    const std::string prefix = prefix_for("lswide");
    const std::string longest = prefix + std::string(200 - prefix.size(), 'n'), shortest = prefix + "s";
    ASSERT_EQ(longest.size(), 200u);
    auto w_long = Writer::create(longest, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r_long = Reader::attach(longest, 0);
    auto w_short = Writer::create(shortest, SegmentOptions{.readers = 3, .capacity = 1 << 20});

    const RunResult res = cli({"ls", "--prefix", prefix});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    std::vector<std::string> lines;
    for (std::size_t pos = 0, end; pos < res.out.size(); pos = end + 1) {
        end = res.out.find('\n', pos);
        if (end == std::string::npos) end = res.out.size();
        lines.push_back(res.out.substr(pos, end - pos));
    }
    ASSERT_EQ(lines.size(), 3u) << res.out;
    const std::string& header = lines[0];
    ASSERT_EQ(header.rfind("NAME ", 0), 0u) << res.out;
    // Where each column starts (left-aligned) or ends (SIZE and RING: right-aligned), from the header.
    const auto start = [&](const char* title) { return header.find(std::string(" ") + title + " ") + 1; };
    const std::size_t owner = start("OWNER"), mode = start("MODE"), readers = start("READERS"),
                      creator = start("CREATOR"), writer = start("WRITER"), state = header.rfind(" STATE") + 1;
    const std::size_t size_end = start("SIZE") + 4, ring_end = start("RING") + 4;
    EXPECT_EQ(header.substr(state), "STATE");
    EXPECT_GT(owner, longest.size()) << "the NAME column is narrower than the longest name:\n" << res.out;
    const std::string me = std::to_string(::getpid()) + " (alive)";
    for (const auto& [name, ranks] : {std::pair{longest, std::string("1/1")}, std::pair{shortest, std::string("0/3")}}) {
        const auto row = std::find_if(lines.begin() + 1, lines.end(), [&](const std::string& l) {
            return l.rfind(name + " ", 0) == 0;
        });
        ASSERT_NE(row, lines.end()) << name << " is not listed:\n" << res.out;
        const std::string& l = *row;
        for (std::size_t col : {owner, mode, readers, creator, writer, state})
            EXPECT_TRUE(l[col - 1] == ' ' && l[col] != ' ') << "a column of '" << name << "' does not start at "
                                                            << col << ", under its title:\n" << res.out;
        for (std::size_t end : {size_end, ring_end})
            EXPECT_TRUE(l[end - 1] != ' ' && l[end] == ' ') << "SIZE/RING of '" << name << "' does not end at " << end
                                                            << ", under its title:\n" << res.out;
        EXPECT_EQ(l.substr(mode, 5), "0600 ") << l;
        EXPECT_EQ(l.substr(readers, ranks.size() + 1), ranks + " ") << l;
        EXPECT_EQ(l.substr(creator, me.size()), me) << l;
        EXPECT_EQ(l.substr(writer, me.size()), me) << l;
        EXPECT_EQ(l.substr(state), "open") << l;
    }
}

TEST(CliStat, ShowsTailHeadsLagStatesAndCounters) {
    ScopedName name("clistat");
    auto w = Writer::create(name, SegmentOptions{.readers = 3, .capacity = 64 << 10});
    auto r0 = Reader::attach(name, 0);
    attach_in_killed_child(name.str(), 1);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(w.write(std::vector<std::byte>(100), 1s), Status::ok);
    std::vector<std::byte> buf;
    ASSERT_EQ(r0.read(buf, 1s), Status::ok);
    const std::uint64_t tail = w.segment().writer_line().tail.load();
    const std::uint64_t head0 = w.segment().reader_slot(0).head.load();
    ASSERT_EQ(tail, 3 * layout::record_size(100));

    const RunResult text = cli({"stat", name.str()});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("tail      " + std::to_string(tail) + " bytes published, 3 messages"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("RANK"), std::string::npos);
    EXPECT_NE(text.out.find("dead"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("never_attached"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("ahead     no wake-ahead made"), std::string::npos) << text.out;

    const RunResult js = cli({"stat", name.str(), "--json"});
    ASSERT_EQ(js.exit_code, 0) << js.err;
    // Fixed field order: substring checks work without a JSON parser; python3 checks the syntax too.
    EXPECT_NE(js.out.find("\"tail\": " + std::to_string(tail)), std::string::npos) << js.out;
    EXPECT_NE(js.out.find("\"messages\": 3,"), std::string::npos) << js.out;
    EXPECT_NE(js.out.find("{\"rank\": 0, \"state\": \"attached\", \"pid\": " + std::to_string(::getpid()) +
                          ", \"pid_alive\": true, \"head\": " + std::to_string(head0) +
                          ", \"lag_bytes\": " + std::to_string(tail - head0) + ", \"lag_messages\": 2, \"messages\": 1,"),
              std::string::npos)
        << js.out;
    EXPECT_NE(js.out.find("{\"rank\": 1, \"state\": \"dead\""), std::string::npos) << js.out;
    EXPECT_NE(js.out.find("\"pid_alive\": false, \"head\": 0, \"lag_bytes\": " + std::to_string(tail) + ", \"lag_messages\": 3"),
              std::string::npos)
        << js.out;
    EXPECT_NE(js.out.find("{\"rank\": 2, \"state\": \"never_attached\", \"pid\": 0"), std::string::npos) << js.out;
    if (python_ok()) {
        EXPECT_TRUE(json_check(js.out, "d['reader_count']==3 and len(d['readers'])==3 and d['writer_alive'] and "
                                       "d['readers'][0]['lag_messages']==2 and not d['closed']"))
            << js.out;
    }
    EXPECT_NE(js.out.find("\"wake_ahead_us\": 0,"), std::string::npos) << js.out;
    // The hint a wake-ahead leaves in the writer line (Writer::wake_ahead): shown as it is.
    w.segment().writer_line().ahead_us.store(250);
    const RunResult ahead = cli({"stat", name.str()});
    EXPECT_NE(ahead.out.find("ahead     last wake-ahead hint 250 us"), std::string::npos)
        << ahead.out;
    EXPECT_NE(cli({"stat", name.str(), "--json"}).out.find("\"wake_ahead_us\": 250,"), std::string::npos);
    w.close();
    const RunResult closed = cli({"stat", name.str(), "--json"});
    EXPECT_NE(closed.out.find("\"closed\": true"), std::string::npos) << closed.out;
}

TEST(CliStat, ErrorsAreClear) {
    const std::string prefix = prefix_for("staterr");
    RunResult r = cli({"stat", prefix + "missing"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
    r = cli({"stat", "a/b"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("may only contain"), std::string::npos) << r.err;
    r = cli({"stat", std::string(201, 'a')});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("1..200"), std::string::npos) << r.err;
    ForeignFile foreign(prefix + "foreign");
    r = cli({"stat", foreign.name});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not a ringcast segment"), std::string::npos) << r.err;
    const std::string dir = prefix + "dir";
    ASSERT_EQ(::mkdir(("/dev/shm/" + dir).c_str(), 0700), 0);
    r = cli({"stat", dir});
    ::rmdir(("/dev/shm/" + dir).c_str());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not a ringcast segment (a directory)"), std::string::npos) << r.err;
    // A FIFO: a read-only open of one waits for a writer that never comes (stat hung on it).
    const std::string fifo = prefix + "fifo";
    ASSERT_EQ(::mkfifo(("/dev/shm/" + fifo).c_str(), 0600), 0);
    r = cli({"stat", fifo});
    ::unlink(("/dev/shm/" + fifo).c_str());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not a ringcast segment (not a regular file)"), std::string::npos) << r.err;
    r = cli({"stat"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("usage"), std::string::npos) << r.err;
    r = cli({"stat", "x", "--bogus"});
    EXPECT_EQ(r.exit_code, 2);
    r = cli({"frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown command"), std::string::npos) << r.err;
    r = cli({});
    EXPECT_EQ(r.exit_code, 2);
    // Help asked for after a command is an answer, not a mistake: usage on stdout, exit 0 (exited 2).
    for (const char* cmd : {"ls", "stat", "rm", "gc"})
        for (const char* flag : {"--help", "-h"}) {
            r = cli({cmd, flag});
            EXPECT_EQ(r.exit_code, 0) << cmd << " " << flag << ": " << r.err;
            EXPECT_NE(r.out.find("usage"), std::string::npos) << cmd << " " << flag << ": " << r.out;
            EXPECT_EQ(r.err, "") << cmd << " " << flag;
        }
    r = cli({"rm", "--", "--help"});  // after `--`, a name (refused as one), never the help
    EXPECT_EQ(r.out.find("usage"), std::string::npos) << r.out;
}

TEST(CliRm, RemovesRingcastSegmentsAndRefusesForeignOnesUnlessForced) {
    const std::string prefix = prefix_for("rm");
    const std::string name = prefix + "seg";
    create_in_dead_child(name);
    ASSERT_TRUE(shm_exists(name));
    RunResult r = cli({"rm", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "removed " + name + "\n");
    EXPECT_FALSE(shm_exists(name));
    r = cli({"rm", name});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;

    ForeignFile foreign(prefix + "foreign");
    r = cli({"rm", foreign.name});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("refusing"), std::string::npos) << r.err;
    EXPECT_TRUE(shm_exists(foreign.name));
    r = cli({"rm", "--force", foreign.name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(shm_exists(foreign.name));

    // A segment in use: kept unless forced (new attaches would fail); forced, removed (its users keep
    // their mapping), with a note saying so.
    ScopedName live("clirm");
    auto w = Writer::create(live, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    r = cli({"rm", live.str()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("refusing to remove '" + live.str() + "': it is in use"), std::string::npos) << r.err;
    EXPECT_TRUE(shm_exists(live.str()));
    r = cli({"rm", "--force", live.str()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
    EXPECT_FALSE(shm_exists(live.str()));
    EXPECT_EQ(w.write(std::vector<std::byte>(10), 1s), Status::ok) << "the writer's mapping stays valid";
}

TEST(CliGc, RemovesOnlySegmentsWhoseCreatorWriterAndReadersAreAllDead) {
    const std::string prefix = prefix_for("gc");
    const std::string abandoned = prefix + "abandoned";        // creator exited, nobody attached
    const std::string dead_reader = prefix + "deadreader";     // creator exited, a reader was SIGKILLed
    const std::string live_reader = prefix + "livereader";     // creator exited, a reader is alive
    const std::string live_creator = prefix + "livecreator";   // we created it and are alive
    create_in_dead_child(abandoned);
    create_in_dead_child(dead_reader);
    attach_in_killed_child(dead_reader, 0);
    create_in_dead_child(live_reader);
    auto reader = Reader::attach(live_reader, 1);
    auto seg = Segment::create(live_creator, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    ForeignFile foreign(prefix + "foreign");

    RunResult r = cli({"gc", "--dry-run", "--prefix", prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("would remove " + abandoned + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("would remove " + dead_reader + "\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("remove " + live_reader), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("remove " + live_creator), std::string::npos) << r.out;
    // Each segment kept is named, with the reason (a bare "2 kept" left the user to guess which).
    const std::string me = std::to_string(::getpid());
    EXPECT_NE(r.out.find("kept " + live_reader + ": in use: reader rank 1 is attached by live pid " + me + "\n"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("kept " + live_creator + ": in use: its creator pid " + me + " is alive\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("2 to remove, 2 kept"), std::string::npos) << r.out;
    for (const auto& n : {abandoned, dead_reader, live_reader, live_creator}) EXPECT_TRUE(shm_exists(n)) << n;

    r = cli({"gc", "--prefix", prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("removed " + abandoned + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("removed " + dead_reader + "\n"), std::string::npos) << r.out;
    EXPECT_FALSE(shm_exists(abandoned));
    EXPECT_FALSE(shm_exists(dead_reader));
    EXPECT_TRUE(shm_exists(live_reader));
    EXPECT_TRUE(shm_exists(live_creator));
    EXPECT_TRUE(shm_exists(foreign.name)) << "gc must never touch what is not a ringcast segment";
    Segment::remove(live_reader);
    Segment::remove(live_creator);

    r = cli({"gc", "extra"});
    EXPECT_EQ(r.exit_code, 2);
}

// A killed executor leaves a gather group behind: its reply rings and the doorbell, which has no owner
// word of its own. gc removes the rings by the owner rule and then the bell whose group has no ring
// left; a live group's bell stays.
TEST(CliGc, RemovesTheDoorbellOfAGatherGroupWhoseCollectorWasKilled) {
    const std::string prefix = prefix_for("gcbell");
    const std::string dead_group = prefix + "dead", live_group = prefix + "live";
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    const pid_t pid = fork_child([&] {
        auto c = GatherCollector::create(dead_group, GatherOptions{.ranks = 2, .capacity = 64 << 10});
        const char ch = 1;
        (void)!::write(p[1], &ch, 1);
        for (;;) ::pause();
    });
    char ch = 0;
    ASSERT_EQ(::read(p[0], &ch, 1), 1);
    ::close(p[0]);
    ::close(p[1]);
    ::kill(pid, SIGKILL);
    ASSERT_NE(wait_child(pid, 30s), 0);
    auto live = GatherCollector::create(live_group, GatherOptions{.ranks = 1, .capacity = 64 << 10});
    for (const auto& n : {gather_bell_name(dead_group), gather_ring_name(dead_group, 0), gather_ring_name(dead_group, 1)})
        ASSERT_TRUE(shm_exists(n)) << n << ": a killed collector leaves it behind";

    const RunResult r = cli({"gc", "--prefix", prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const auto& n : {gather_bell_name(dead_group), gather_ring_name(dead_group, 0), gather_ring_name(dead_group, 1)}) {
        EXPECT_FALSE(shm_exists(n)) << n << "\n" << r.out;
        EXPECT_NE(r.out.find("removed " + n + "\n"), std::string::npos) << r.out;
    }
    EXPECT_TRUE(shm_exists(gather_bell_name(live_group))) << "a live group's bell must stay\n" << r.out;
    EXPECT_TRUE(shm_exists(gather_ring_name(live_group, 0)));
    EXPECT_NE(r.out.find("3 removed, 2 kept"), std::string::npos) << "the live group's ring and bell are kept\n" << r.out;
}

// ls, stat and rm know a gather doorbell (no segment header: it was "not a ringcast segment (foreign
// magic)" to stat and rm, and missing from ls): its group and how many of the group's reply rings
// are there; rm removes a bell whose group has none left, and one with rings only when forced.
TEST(CliBell, LsStatAndRmKnowAGatherDoorbell) {
    const std::string prefix = prefix_for("bell");
    const std::string group = prefix + "g";
    const std::string bell = gather_bell_name(group);
    std::optional<GatherCollector> live(GatherCollector::create(group, GatherOptions{.ranks = 2, .capacity = 64 << 10}));
    RunResult r = cli({"stat", bell});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("the gather group '" + group + "' of 2 ranks"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 of the group's 2 reply rings are there"), std::string::npos) << r.out;
    r = cli({"stat", "--json", bell});
    EXPECT_NE(r.out.find("\"doorbell_of\": \"" + group + "\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"rings_left\": 2"), std::string::npos) << r.out;
    r = cli({"ls", "--prefix", prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("doorbell of '" + group + "', 2/2 reply rings"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(gather_ring_name(group, 1)), std::string::npos) << r.out;
    r = cli({"ls", "--json", "--prefix", prefix});
    EXPECT_NE(r.out.find("\"doorbell_of\": \"" + group + "\", \"ranks\": 2, \"rings_left\": 2"), std::string::npos) << r.out;
    {  // in name order, as the table: a segment named before the group comes first, the bell beside its rings
        auto before = Segment::create(prefix + "a", SegmentOptions{.readers = 1, .capacity = 64 << 10});
        r = cli({"ls", "--json", "--prefix", prefix});
        const auto at = [&](const std::string& n) { return r.out.find("\"name\": \"" + n + "\""); };
        ASSERT_NE(at(bell), std::string::npos) << r.out;
        EXPECT_LT(at(prefix + "a"), at(bell)) << r.out;
        EXPECT_LT(at(bell), at(gather_ring_name(group, 0))) << r.out;
        EXPECT_TRUE(json_check(r.out, "len(d) == 4 and [e['name'] for e in d] == sorted(e['name'] for e in d)")) << r.out;
        (void)Segment::remove(prefix + "a");
    }
    r = cli({"rm", bell});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("still has 2 of its 2 reply rings"), std::string::npos) << r.err;
    EXPECT_TRUE(shm_exists(bell));

    // Its rings gone (as a killed collector's are to `gc`): abandoned, removed without --force.
    for (std::uint32_t rank = 0; rank < 2; ++rank) ASSERT_EQ(::shm_unlink(("/" + gather_ring_name(group, rank)).c_str()), 0);
    r = cli({"ls", "--prefix", prefix});
    EXPECT_NE(r.out.find("0/2 reply rings (abandoned)"), std::string::npos) << r.out;
    r = cli({"rm", bell});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "removed " + bell + "\n");
    EXPECT_FALSE(shm_exists(bell));
    live.reset();  // its names are gone already: nothing else is removed
}

// A doorbell another ringcast version left (same size and magic, another ABI): ls and stat say so, gc
// leaves it (another version's objects are never touched), rm removes it.
TEST(CliBell, AnotherVersionsDoorbellIsShownKeptByGcAndRemovedByRm) {
    const std::string prefix = prefix_for("bellabi");
    const std::string group = prefix + "g";
    const std::string bell = gather_bell_name(group);
    {  // what a killed collector of another version leaves: its rings gone, its bell kept
        const int fd = ::shm_open(("/" + bell).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        ASSERT_GE(fd, 0);
        layout::DoorbellLine line{};
        line.ranks.store(1);
        line.abi_version = layout::kAbiVersion + 1;
        line.layout_hash = layout::kLayoutHash;
        line.magic.store(layout::kDoorbellMagic);
        const bool written = ::ftruncate(fd, sizeof line) == 0 && ::pwrite(fd, &line, sizeof line, 0) == sizeof line;
        ::close(fd);
        ASSERT_TRUE(written);
    }
    const std::string abi = std::to_string(layout::kAbiVersion + 1);
    RunResult r = cli({"ls", "--prefix", prefix});
    EXPECT_NE(r.out.find("0/1 reply rings (abandoned), ABI " + abi + " (another ringcast version's)"), std::string::npos)
        << r.out;
    r = cli({"stat", bell});
    EXPECT_NE(r.out.find("version   ABI " + abi + ": another ringcast version's"), std::string::npos) << r.out;
    r = cli({"stat", "--json", bell});
    EXPECT_TRUE(json_check(r.out, "d['abi_version'] == " + abi)) << r.out;
    r = cli({"gc", "--prefix", prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("0 removed, 1 kept"), std::string::npos) << r.out;
    EXPECT_TRUE(shm_exists(bell)) << "gc removed another version's bell";
    r = cli({"rm", bell});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(shm_exists(bell));
}

// The advice a create gives for a name it cannot reclaim works as given: a foreign object needs
// `ringcast rm --force` (plain rm refuses it).
TEST(CliRm, TheAdviceOfACreateOverAForeignObjectWorksAsGiven) {
    ForeignFile foreign(prefix_for("advice") + "q");
    std::string advice;
    try {
        (void)Writer::create(foreign.name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
        FAIL() << "created over a foreign object";
    } catch (const Error& e) {
        const std::string what = e.what();
        const auto at = what.find("`ringcast rm");
        ASSERT_NE(at, std::string::npos) << what;
        advice = what.substr(at + 1, what.find('`', at + 1) - at - 1);
    }
    EXPECT_EQ(advice, "ringcast rm --force " + foreign.name);
    const RunResult r = cli({"rm", "--force", foreign.name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(shm_exists(foreign.name));

    // A header still zero (its creator may be making it right now): the advice says when it applies.
    const std::string unmade = prefix_for("advice") + "unmade";
    {
        std::ofstream f("/dev/shm/" + unmade, std::ios::binary);
        f << std::string(64 << 10, '\0');
    }
    try {
        (void)Writer::create(unmade, SegmentOptions{.readers = 1, .capacity = 64 << 10});
        ADD_FAILURE() << "created over a segment whose header is not made yet";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("once its creator is gone, remove it with `ringcast rm --force " + unmade + "`"),
                  std::string::npos) << e.what();
    }
    ::unlink(("/dev/shm/" + unmade).c_str());
}

// Every dead-peer error tells the user how to get /dev/shm back.
TEST(CliGc, DeadPeerErrorsNameRingcastGc) {
    const std::string name = prefix_for("gchint") + "q";
    const pid_t pid = fork_child([&] {
        auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
        for (;;) ::pause();
    }, false);
    ASSERT_TRUE(wait_until([&] { return shm_exists(name); }, 10s));
    ReaderOptions ro;
    ro.liveness_interval = 50ms;
    ro.create_timeout = 10s;
    auto reader = Reader::attach(name, 0, ro);
    // The name appears before the writer's claim: a writer killed before it claimed was never there
    // for the reader (a launcher may create a segment for a writer that opens it later).
    ASSERT_TRUE(wait_until([&] {
        return layout::unpack_owner(reader.segment().header().writer_owner.load()).pid == static_cast<std::uint32_t>(pid);
    }, 10s));
    ::kill(pid, SIGKILL);
    ASSERT_NE(wait_child(pid, 30s), 0);
    try {
        std::vector<std::byte> buf;
        (void)reader.read(buf, 5s);
        FAIL() << "a read from a queue whose writer was killed must throw peer_dead";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
        EXPECT_NE(std::string(e.what()).find("`ringcast gc`"), std::string::npos) << e.what();
    }
    Segment::remove(name);
}

// A segment whose magic is ringcast's but whose header does not validate (here: made by another ABI
// version) cannot tell who uses it: rm refuses it without --force, even when it is in use (it was
// removed from under its live writer: the in-use check only ran for a header that validated).
TEST(CliRm, RefusesASegmentWhoseUseCannotBeJudgedUnlessForced) {
    ScopedName name("clirmabi");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto& version = w.segment().header().abi_version;
    const std::uint32_t ours = version;
    version = ours - 1;  // what a segment of an older ringcast looks like to this one
    RunResult r = cli({"rm", name.str()});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.err.find("refusing to remove '" + name.str() + "': cannot judge whether it is in use: "),
              std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ABI version " + std::to_string(ours - 1)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--force removes it anyway"), std::string::npos) << r.err;
    EXPECT_TRUE(shm_exists(name.str())) << "a segment in use was removed without --force";
    r = cli({"rm", "--force", name.str()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("whether '" + name.str() + "' is in use cannot be judged"), std::string::npos) << r.err;
    EXPECT_FALSE(shm_exists(name.str()));
    version = ours;
}

// rm judges the object the name leads to, then removes it: in between, the name may have been removed
// and a new segment made under it (a writer reclaiming the name). Only the judged object is removed.
// remove_if_still is the step `rm` runs after its judgement; the name is changed between the two here.
TEST(CliRm, RemovesOnlyTheObjectItJudged) {
    const std::string name = prefix_for("rmsame") + "q";
    create_in_dead_child(name);
    const cli::SegmentInfo judged = cli::inspect(name);
    ASSERT_TRUE(judged.error.empty() && judged.identified && judged.abandoned()) << judged.error;
    ASSERT_TRUE(Segment::remove(name));
    create_in_dead_child(name);  // a new object under the name (abandoned too: only its identity differs)
    for (const bool force : {false, true}) {
        const cli::RemovalResult r = cli::remove_if_still(name, judged.identity, force);
        EXPECT_EQ(r.outcome, cli::Removal::replaced) << "force " << force;
        EXPECT_TRUE(shm_exists(name)) << "the new object made under the name was removed (force " << force << ")";
    }
    // Judged abandoned, then a reader attached: not removed unless forced.
    const cli::SegmentInfo again = cli::inspect(name);
    ASSERT_TRUE(again.abandoned()) << again.error;
    {
        auto reader = Reader::attach(name, 0);
        const cli::RemovalResult r = cli::remove_if_still(name, again.identity, false);
        EXPECT_EQ(r.outcome, cli::Removal::now_in_use);
        EXPECT_NE(r.now.user().find("reader rank 0 is attached by live pid " + std::to_string(::getpid())),
                  std::string::npos) << r.now.user();
        EXPECT_TRUE(shm_exists(name));
    }
    EXPECT_EQ(cli::remove_if_still(name, again.identity, false).outcome, cli::Removal::removed);
    EXPECT_FALSE(shm_exists(name));
    EXPECT_EQ(cli::remove_if_still(name, again.identity, true).outcome, cli::Removal::gone);
}

// Output that could not be written is a failure (exit 1, the cause on stderr), never an exit 0 with
// nothing printed: a script would read an empty `ls --json` as "no segments".
TEST(CliOutput, AFailedWriteOfTheOutputFailsTheCommand) {
    const std::string prefix = prefix_for("full");
    ScopedName name("clifull");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"ls", "--prefix", prefix}, {"ls", "--json", "--prefix", prefix}, {"stat", name.str()},
          {"stat", "--json", name.str()}, {"gc", "--dry-run", "--prefix", prefix}}) {
        const RunResult r = cli(args, RunOptions{.stdout_path = "/dev/full"});
        EXPECT_EQ(r.exit_code, 1) << args[0] << " " << args[1] << ": " << r.err;
        EXPECT_NE(r.err.find("ringcast: write error: " + std::string(std::strerror(ENOSPC))), std::string::npos)
            << args[0] << " " << args[1] << ": " << r.err;
    }
    EXPECT_EQ(cli({"stat", name.str()}).exit_code, 0) << "the same command with somewhere to write to";
}

// --prefix never takes the next option for its value: `gc --prefix --dry-run` ran a real gc (of the
// prefix "--dry-run"). A prefix that starts with '-' is written --prefix=P.
TEST(CliArgs, PrefixNeverTakesAnOptionAsItsValue) {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"ls", "--prefix", "--json"},
                                                 {"gc", "--prefix", "--dry-run"}, {"gc", "--prefix"}}) {
        const RunResult r = cli(args);
        EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1] << ": " << r.out;
        EXPECT_NE(r.err.find("--prefix needs a value"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "") << "it ran: " << r.out;
    }
    const std::string prefix = "-" + prefix_for("dashprefix");
    const std::string name = prefix + "q";
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    RunResult r = cli({"ls", "--prefix=" + prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\n" + name + " "), std::string::npos) << r.out;
    r = cli({"gc", "--dry-run", "--prefix=" + prefix});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("0 to remove, 1 kept"), std::string::npos) << r.out;
    EXPECT_TRUE(shm_exists(name));
    (void)Segment::remove(name);
}

// A valid name may start with '-': after `--`, stat and rm take it as the name, not an option.
TEST(CliArgs, DoubleDashEndsTheOptions) {
    const std::string name = "-" + prefix_for("dash") + "q";
    create_in_dead_child(name);
    RunResult r = cli({"stat", name});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("goes after `--`"), std::string::npos) << r.err;
    r = cli({"stat", "--json", "--", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"name\": \"" + name + "\""), std::string::npos) << r.out;
    r = cli({"rm", "--", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "removed " + name + "\n");
    EXPECT_FALSE(shm_exists(name));
    (void)Segment::remove(name);
}

// A segment removed between the listing and its inspection is no segment any more: left out of ls
// and gc (it was a row of blanks, uid 0, mode 0000 and "error: does not exist", and gc said it skipped
// it). inspect_listed is what both run on the listing; the name is removed between the two here.
TEST(CliLs, LeavesOutASegmentRemovedSinceTheListing) {
    const std::string prefix = prefix_for("gone");
    const std::string stays = prefix + "stays", goes = prefix + "goes";
    create_in_dead_child(stays);
    create_in_dead_child(goes);
    const cli::Listing listing = cli::list_segments(prefix);
    ASSERT_EQ(listing.names, (std::vector<std::string>{goes, stays}));
    ASSERT_TRUE(Segment::remove(goes));
    EXPECT_TRUE(cli::inspect(goes).gone);
    const std::vector<cli::SegmentInfo> infos = cli::inspect_listed(listing.names);
    ASSERT_EQ(infos.size(), 1u);
    EXPECT_EQ(infos[0].name, stays);
    EXPECT_TRUE(infos[0].error.empty()) << infos[0].error;
    (void)Segment::remove(stays);
}

// /dev/shm is sticky: only an object's owner or root may unlink it, whatever its mode. rm says so,
// naming the owner, and offers no --force (it cannot help); gc names another user's segment it keeps.
TEST(CliRm, AnotherUsersSegmentNamesItsOwnerAndOffersNoForce) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (to act as two users)";
    constexpr uid_t kNobody = 65534;
    const std::string prefix = prefix_for("other");
    const std::string name = prefix + "q";
    const pid_t pid = fork_child([&] {
        (void)Segment::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10, .mode = 0644});
    });
    ASSERT_EQ(wait_child(pid, 30s), 0);
    for (const bool force : {false, true}) {
        std::vector<std::string> args{"rm", name};
        if (force) args.insert(args.begin() + 1, "--force");
        const RunResult r = cli(args, RunOptions{.stdout_path = {}, .uid = kNobody});
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.err.find("cannot remove '" + name + "': only root, its owner, may remove it (/dev/shm is a sticky "
                             "directory; this process runs as uid 65534)"),
                  std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("--force"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("attaching"), std::string::npos) << r.err;
        EXPECT_TRUE(shm_exists(name));
    }
    ASSERT_EQ(::chown(("/dev/shm/" + name).c_str(), kNobody, kNobody), 0);
    const RunResult gc = cli({"gc", "--prefix", prefix});
    EXPECT_EQ(gc.exit_code, 0) << gc.err;
    EXPECT_NE(gc.out.find("kept " + name + ": another user's (uid 65534): gc removes only this user's (uid 0) "
                          "segments, and only its owner or root may remove it"),
              std::string::npos) << gc.out;
    EXPECT_NE(gc.out.find("0 removed, 1 kept"), std::string::npos) << gc.out;
    EXPECT_TRUE(shm_exists(name));
    const RunResult rm = cli({"rm", name});  // root may
    EXPECT_EQ(rm.exit_code, 0) << rm.err;
    EXPECT_FALSE(shm_exists(name));
}

// stat reads a live queue's counters while they move. Read in the order inspect uses (each rank's
// message count, its head, the tail, the writer's message count), both lags can only come out too
// large: a reader keeping pace never shows bytes to read and fewer messages than those bytes hold.
// (The writer's count read first and each rank's last showed lag_messages 0 beside a byte lag.) Each
// message here is one 64-byte record and the ring a multiple of it (no wrap padding): lag_bytes / 64
// messages lie between head and tail, of which at most one may be published without its count yet.
TEST(CliStat, MessageAndByteLagAgreeOnALiveQueue) {
    ScopedName name("clilag");
    constexpr std::size_t kPayload = 48;
    constexpr std::uint64_t kRecord = layout::record_size(kPayload);
    static_assert(kRecord == 64 && (std::uint64_t{64} << 10) % kRecord == 0);
    auto seg = Segment::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    // Writer and reader in another process, as a live queue's are; stopped by SIGKILL.
    const pid_t pid = fork_child([&] {
        auto w = Writer::open(name);
        auto r = Reader::attach(name, 0);
        std::thread reader([&] {
            std::vector<std::byte> buf;
            for (;;) (void)r.read(buf, 1s);
        });
        const std::vector<std::byte> msg(kPayload);
        const char c = 1;
        (void)!::write(ready[1], &c, 1);
        for (;;) (void)w.write(msg, 1s);
    }, false);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ::close(ready[1]);
    int checked = 0, understated = 0;
    std::string example;
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < until && checked < 20000) {
        const cli::SegmentInfo s = cli::inspect(name.str());
        ASSERT_TRUE(s.error.empty()) << s.error;
        ASSERT_EQ(s.readers.size(), 1u);
        const auto& rank = s.readers[0];
        ++checked;
        if (rank.lag_messages + 1 < rank.lag_bytes / kRecord) {
            if (understated++ == 0)
                example = "lag_bytes " + std::to_string(rank.lag_bytes) + " (" + std::to_string(rank.lag_bytes / kRecord) +
                          " messages) but lag_messages " + std::to_string(rank.lag_messages);
        }
    }
    ::kill(pid, SIGKILL);
    (void)wait_child(pid, 30s);
    EXPECT_EQ(understated, 0) << understated << " of " << checked << " looks, e.g. " << example;
    EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace ringcast::test
