/* The temporary folder `run --output-dir DIR` writes into before it moves
 * the outputs into place: named after the process (".tandem-tmp-PID-XXXXXX")
 * and marked with an owner file, so that a later run can prove a leftover
 * one is its own kind from a process that is gone, and remove it; and
 * guarded against SIGINT, SIGTERM and SIGHUP. The handler only records the
 * signal (async-signal-safe); the writer checks cli_interrupted() between
 * files, takes back what it wrote and exits with 128 + the signal. */
#define _POSIX_C_SOURCE 200809L

#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_PREFIX ".tandem-tmp-"
#define OWNER_FILE ".tandem-owner"

static volatile sig_atomic_t got_signal;
static const int guarded[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction saved[sizeof guarded / sizeof guarded[0]];
static int installed;

static void on_signal(int sig) { got_signal = sig; }

int cli_interrupted(void) { return got_signal ? 128 + (int)got_signal : 0; }

const char *cli_signal_name(int code)
{
    switch (code - 128) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
    }
}

static void guard_begin(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* the library's writes simply go on */
    got_signal = 0;
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++)
        sigaction(guarded[i], &sa, &saved[i]);
    installed = 1;
}

void cli_tmpdir_guard_end(void)
{
    if (!installed)
        return;
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++)
        sigaction(guarded[i], &saved[i], NULL);
    installed = 0;
}

static char *join(const char *dir, const char *name)
{
    size_t ld = strlen(dir), ln = strlen(name);
    char *s = malloc(ld + ln + 2);
    if (!s)
        return NULL;
    memcpy(s, dir, ld);
    s[ld] = '/';
    memcpy(s + ld + 1, name, ln + 1);
    return s;
}

void cli_remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *p = join(dir, de->d_name);
            if (!p)
                continue;
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
                cli_remove_tree(p);
            else
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* What the owner file of a temporary folder of process pid holds. */
static void owner_text(long pid, char *buf, size_t size)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    snprintf(buf, size, "tandem run output folder\npid %ld\nhost %s\n", pid, host);
}

/* The pid in ".tandem-tmp-PID-XXXXXX", or -1 for any other name. */
static long name_pid(const char *name)
{
    size_t lp = strlen(TMP_PREFIX);
    if (strncmp(name, TMP_PREFIX, lp) != 0)
        return -1;
    const char *s = name + lp;
    size_t digits = strspn(s, "0123456789");
    if (digits == 0 || digits > 9 || s[digits] != '-' || strlen(s + digits + 1) != 6)
        return -1;
    return strtol(s, NULL, 10);
}

/* 1 when DIR/name is a temporary folder of a tandem run that is gone: the
 * name carries a pid, the folder is ours (same user), its owner file says
 * so for that pid on this host, and no process has that pid. */
static int provably_stale(const char *dir, const char *name)
{
    long pid = name_pid(name);
    if (pid <= 0 || pid == (long)getpid())
        return 0;
    char *p = join(dir, name), *o = p ? join(p, OWNER_FILE) : NULL;
    int stale = 0;
    struct stat sb;
    if (o && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid()) {
        int fd = open(o, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat ob;
        if (fd >= 0 && fstat(fd, &ob) == 0 && S_ISREG(ob.st_mode) && ob.st_size < 512) {
            char want[512], have[512];
            owner_text(pid, want, sizeof want);
            ssize_t n = read(fd, have, sizeof have - 1);
            if (n >= 0) {
                have[n] = '\0';
                stale = strcmp(have, want) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
            }
        }
        if (fd >= 0)
            close(fd);
    }
    free(o);
    free(p);
    return stale;
}

/* Removes the provably stale temporary folders in dir (see above); others
 * (another user's, a live process's, one without its owner file) stay. */
static void sweep_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!provably_stale(dir, de->d_name))
            continue;
        char *p = join(dir, de->d_name);
        if (!p)
            continue;
        cli_remove_tree(p);
        fprintf(stderr, "tandem: removed '%s', left by an interrupted run (pid %ld)\n", p, name_pid(de->d_name));
        free(p);
    }
    closedir(d);
}

int cli_tmpdir_create(const char *dir, char **out)
{
    *out = NULL;
    sweep_stale(dir);
    char name[64];
    snprintf(name, sizeof name, TMP_PREFIX "%ld-XXXXXX", (long)getpid());
    char *tmp = join(dir, name);
    if (!tmp) {
        cli_error("out of memory");
        return EXIT_INTERNAL;
    }
    /* From here a signal only sets a flag: the caller checks it between
     * files and removes this folder. */
    guard_begin();
    if (!mkdtemp(tmp)) {
        cli_error("cannot write into the output folder '%s': %s", dir, strerror(errno));
        free(tmp);
        cli_tmpdir_guard_end();
        return EXIT_IO;
    }
    char *o = join(tmp, OWNER_FILE);
    char text[512];
    owner_text((long)getpid(), text, sizeof text);
    int fd = o ? open(o, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    int ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    int err = errno;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    free(o);
    if (!ok) {
        cli_error("cannot write into the output folder '%s': %s", dir, strerror(err));
        cli_remove_tree(tmp);
        free(tmp);
        cli_tmpdir_guard_end();
        return EXIT_IO;
    }
    *out = tmp;
    return 0;
}
