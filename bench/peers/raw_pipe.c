/* Raw-pipe floor: the same bytes as an ACP exchange, with no JSON work at all.
 *
 *   raw_pipe agent                                     answers lines on stdin/stdout
 *   raw_pipe client ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...   the driver (see _shared.py)
 *
 * The agent answers every line with one canned response line, except a line containing
 * "bench:updates N", which it answers with N canned session/update lines (one write()
 * each) and then the response.  Compiled at bench time into a temporary directory
 * (gcc -O2); never committed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF (1 << 20)

static const char RESPONSE[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"stopReason\":\"end_turn\"}}\n";
static const char UPDATE_FMT[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"sess_0123456789abcdef\","
    "\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":"
    "\"chunk %05d of the streamed reply \"},\"messageId\":\"sess_0123456789abcdef-agent-1\"}}}\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A line reader over a file descriptor. */
typedef struct { int fd; char *buf; size_t start, end; } Reader;

/* Returns the length of the next line (without '\n') and points *line at it; -1 at EOF. */
static long read_line(Reader *r, char **line) {
    for (;;) {
        char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
        if (nl) {
            *line = r->buf + r->start;
            long len = nl - (r->buf + r->start);
            r->start += (size_t)len + 1;
            return len;
        }
        if (r->start > 0) {
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->end -= r->start;
            r->start = 0;
        }
        if (r->end == BUF) return -1; /* line too long: not in this benchmark */
        ssize_t n = read(r->fd, r->buf + r->end, BUF - r->end);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        r->end += (size_t)n;
    }
}

static int agent(void) {
    Reader r = {0, malloc(BUF), 0, 0};
    char *out = malloc(BUF);
    char *line;
    long len;
    while ((len = read_line(&r, &line)) >= 0) {
        char *kw = memmem(line, (size_t)len, "bench:updates ", 14);
        if (kw) {
            /* One write() per frame, as an agent streaming as it goes does. */
            int n = atoi(kw + 14);
            for (int i = 0; i < n; i++) {
                int used = sprintf(out, UPDATE_FMT, i);
                if (write_all(1, out, (size_t)used)) return 1;
            }
        }
        if (write_all(1, RESPONSE, sizeof RESPONSE - 1)) return 1;
    }
    return 0;
}

static void status(pid_t pid, long *hwm, long *rss) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    *hwm = *rss = -1;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmHWM:", 6)) *hwm = atol(line + 6);
        if (!strncmp(line, "VmRSS:", 6)) *rss = atol(line + 6);
    }
    fclose(f);
}

/* User + system CPU seconds of a process, from /proc/<pid>/stat. */
static double cpu_seconds(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    unsigned long ut = 0, st = 0;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int client(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: raw_pipe client ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...\n");
        return 2;
    }
    int rts = atoi(argv[2]), warm = atoi(argv[3]), updates = atoi(argv[4]);
    int to_agent[2], from_agent[2];
    if (pipe(to_agent) || pipe(from_agent)) return 2;
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_agent[0], 0);
        dup2(from_agent[1], 1);
        close(to_agent[0]); close(to_agent[1]); close(from_agent[0]); close(from_agent[1]);
        execvp(argv[5], argv + 5);
        _exit(127);
    }
    close(to_agent[0]);
    close(from_agent[1]);
    int wfd = to_agent[1];
    Reader r = {from_agent[0], malloc(BUF), 0, 0};
    char *line;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n");
    if (write_all(wfd, msg, (size_t)n) || read_line(&r, &line) < 0) return 3;
    double init_ms = (now() - t0) * 1e3;
    static const char PROMPT[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\",\"params\":{\"sessionId\":"
        "\"sess_0123456789abcdef\",\"prompt\":[{\"type\":\"text\",\"text\":\"ping\"}]}}\n";
    for (int i = 0; i < warm; i++)
        if (write_all(wfd, PROMPT, sizeof PROMPT - 1) || read_line(&r, &line) < 0) return 3;
    long got = 0;
    double a0 = 0, s0 = 0, t = 0;
    for (int pass = 0; pass < 2; pass++) {
        int want = pass == 0 ? 100 : updates;
        n = snprintf(msg, sizeof msg,
                     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":"
                     "\"sess_0123456789abcdef\",\"prompt\":[{\"type\":\"text\",\"text\":\"bench:updates %d\"}]}}\n",
                     want);
        a0 = cpu_seconds(pid);
        s0 = cpu_seconds(getpid());
        t = now();
        got = 0;
        if (write_all(wfd, msg, (size_t)n)) return 3;
        for (int i = 0; i <= want; i++) {
            long len = read_line(&r, &line);
            if (len < 0) return 3;
            if (i < want) got++;
        }
    }
    double upd_seconds = now() - t;
    double agent_cpu_upd = cpu_seconds(pid) - a0, client_cpu_upd = cpu_seconds(getpid()) - s0;
    long hwm, rss, self_hwm, self_rss;
    status(pid, &hwm, &rss);
    a0 = cpu_seconds(pid);
    s0 = cpu_seconds(getpid());
    t = now();
    for (int i = 0; i < rts; i++)
        if (write_all(wfd, PROMPT, sizeof PROMPT - 1) || read_line(&r, &line) < 0) return 3;
    double rt_seconds = now() - t;
    double agent_cpu_rt = cpu_seconds(pid) - a0, client_cpu_rt = cpu_seconds(getpid()) - s0;
    close(wfd);
    int st;
    waitpid(pid, &st, 0);
    status(getpid(), &self_hwm, &self_rss);
    printf("{\"init_ms\": %.6f, \"round_trips\": %d, \"rt_seconds\": %.9f, \"updates\": %d, "
           "\"updates_received\": %ld, \"upd_seconds\": %.9f, \"agent_pid\": %d, \"agent_vmhwm_kib\": %ld, "
           "\"agent_vmrss_kib\": %ld, \"driver_vmhwm_kib\": %ld, \"agent_cpu_rt_s\": %.3f, "
           "\"client_cpu_rt_s\": %.3f, \"agent_cpu_upd_s\": %.3f, \"client_cpu_upd_s\": %.3f}\n",
           init_ms, rts, rt_seconds, updates, got, upd_seconds, (int)pid, hwm, rss, self_hwm, agent_cpu_rt,
           client_cpu_rt, agent_cpu_upd, client_cpu_upd);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && !strcmp(argv[1], "agent")) return agent();
    if (argc >= 2 && !strcmp(argv[1], "client")) return client(argc, argv);
    fprintf(stderr, "usage: raw_pipe agent | raw_pipe client ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...\n");
    return 2;
}
