/*
 * bedrock-sandbox: restricts itself, then execs a command (REQ-BASH-008, REQ-BED-014).
 *
 *   bedrock-sandbox --probe
 *       Prints {"landlock_abi":N,"seccomp":B,"sandbox":B,"error":"..."} after applying the full
 *       Restricted sandbox in a forked child and checking that a write and a socket are refused.
 *   bedrock-sandbox [options] -- PROGRAM [ARGS...]
 *       --restricted      Landlock read-only filesystem (writable: /dev/null and --scratch),
 *                         Landlock TCP bind/connect denied, Landlock signal and abstract unix
 *                         socket scoping (ABI >= 6), a seccomp filter denying every socket(),
 *                         io_uring, namespaces and a few kernel-facing calls, all capabilities
 *                         dropped. Fails (exit 125) rather than run unsandboxed.
 *       --scratch DIR     a directory left writable in Restricted mode
 *       --private-tmp DIR the run's own scratch: with CAP_SYS_ADMIN, a fresh tmpfs mounted on DIR
 *                         in a private mount namespace (other runs' scratch is not visible, and
 *                         it vanishes with the run); otherwise a mkdtemp directory under DIR,
 *                         removed when the run ends. DIR/tmp (TMPDIR) and DIR/home (HOME) are
 *                         created for the tool user and stay writable in both modes.
 *       --scratch-size BYTES, --scratch-inodes N   bound that tmpfs (size=, nr_inodes=)
 *       --workspace DIR   a workspace run: the working directory must be inside DIR (real paths);
 *                         Landlock lets the command read only the system directories, DIR, its
 *                         scratch, /proc, the listing of /dev and six device nodes; Unrestricted
 *                         writes go to DIR (not the working directory) and --write-scope is ignored
 *       --system-dir P    (repeatable) the system directories of a workspace run (default /usr /bin
 *                         /sbin /lib /lib32 /lib64 /libx32 /etc /opt, those that exist)
 *       --view            (with --workspace and --private-tmp; needs CAP_SYS_ADMIN) a new pid
 *                         namespace whose first process builds the tool's view and pivots into it:
 *                         see build_view()
 *       --separate-stderr keep the command's stderr apart from its stdout (a long-lived server
 *                         speaking a protocol on stdin/stdout, e.g. an MCP stdio server)
 *       --hide PATH       (repeatable, needs the mount namespace) an empty read-only tmpfs over PATH
 *       --uid N --gid N   run the command as this user and group (never 0), with no
 *                         supplementary groups; needs CAP_SETUID/CAP_SETGID. Capabilities are
 *                         gone after the switch (checked), no_new_privs is set.
 *       --write-scope S   Unrestricted mode: `workspace` (default) = Landlock lets the command
 *                         write only the working directory, its scratch and /dev/null; `host` =
 *                         no filesystem restriction beyond the user's own permissions
 *       --deny-port N     (repeatable) Unrestricted mode: TCP connect to port N is refused by
 *                         Landlock (ABI >= 4), whatever the address; every other port is allowed
 *       --net-ruleset P:F take those port rules prebuilt from a holder process (pid P, fd F)
 *   bedrock-sandbox --hold-net-ruleset --deny-port N...
 *       Builds the port rules once, prints "ready PID FD", and keeps them until stdin closes.
 *       --cgroup DIR      (repeatable, one per hierarchy) join this cgroup before exec, so its
 *                         pids.max, memory and cpu limits bound the tree
 *   bedrock-sandbox --await-args [--cgroup DIR]
 *       Started ahead of its run: joins DIR now (the slow part of a cgroup), writes "ready" on
 *       fd 3, then reads "CWD\0ARG\0...\0" on fd 4 until EOF, enters CWD and runs as if ARGs
 *       (the options above, `--`, the command) had been given. See await_args().
 *       --mem BYTES       RLIMIT_AS           --cpu SECONDS   RLIMIT_CPU (hard = soft + 5)
 *       --nproc N         RLIMIT_NPROC        --fsize BYTES   RLIMIT_FSIZE
 *       --nofile N        RLIMIT_NOFILE       (0 or absent: leave the limit unchanged)
 *       --max-abi N       use at most Landlock ABI N (tests of the older-kernel fallbacks)
 *   Stderr is joined to stdout just before exec, so the command's output keeps its order;
 *   the helper's own errors, before that point, stay on stderr (exit status 125).
 *
 * The helper stays as a supervisor: it becomes a child subreaper, forks the command into a
 * new session and process group (the group the runner kills on timeout and cancel), writes
 * "pgid N\n" on fd 3 when that fd is open, reaps every process of the tree the moment it
 * dies, kills whatever the command leaves running when it exits (setsid escapees included:
 * as orphans they become the supervisor's children), and exits last with the command's
 * status (or dies of its signal). SIGTERM, SIGINT, SIGHUP, and the runner's death (delivered
 * as SIGTERM by PR_SET_PDEATHSIG) make it kill the tree. So the helper's exit means the whole tree is gone, without
 * depending on how promptly PID 1 reaps orphans. Limits, the cgroup and the sandbox apply to
 * the command only; the supervisor stays outside them, where the command cannot signal it
 * (except the cgroup, which a helper started with --await-args has joined ahead of its run).
 *
 * The system headers may predate the running kernel, so the Landlock ABI is defined here and
 * the kernel is asked for its version; rights the kernel does not know are left out.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <ftw.h>
#include <grp.h>
#include <unistd.h>

/* ---- Landlock ABI (include/uapi/linux/landlock.h, up to ABI 7) ---- */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

struct br_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; /* ABI 4 */
  uint64_t scoped;             /* ABI 6 */
};

struct br_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

#define BR_CREATE_RULESET_VERSION (1U << 0)
#define BR_RULE_PATH_BENEATH 1

#define BR_FS_EXECUTE (1ULL << 0)
#define BR_FS_WRITE_FILE (1ULL << 1)
#define BR_FS_READ_FILE (1ULL << 2)
#define BR_FS_READ_DIR (1ULL << 3)
#define BR_FS_REMOVE_DIR (1ULL << 4)
#define BR_FS_REMOVE_FILE (1ULL << 5)
#define BR_FS_MAKE_CHAR (1ULL << 6)
#define BR_FS_MAKE_DIR (1ULL << 7)
#define BR_FS_MAKE_REG (1ULL << 8)
#define BR_FS_MAKE_SOCK (1ULL << 9)
#define BR_FS_MAKE_FIFO (1ULL << 10)
#define BR_FS_MAKE_BLOCK (1ULL << 11)
#define BR_FS_MAKE_SYM (1ULL << 12)
#define BR_FS_REFER (1ULL << 13)     /* ABI 2 */
#define BR_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define BR_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */

#define BR_NET_BIND_TCP (1ULL << 0)    /* ABI 4 */
#define BR_NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */

#define BR_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define BR_SCOPE_SIGNAL (1ULL << 1)               /* ABI 6 */

static int landlock_abi(void) {
  long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, BR_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights_for(int abi) {
  uint64_t rights = (BR_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2) rights |= BR_FS_REFER;
  if (abi >= 3) rights |= BR_FS_TRUNCATE;
  if (abi >= 5) rights |= BR_FS_IOCTL_DEV;
  return rights;
}

static int add_path_rule(int ruleset, const char *path, uint64_t allowed) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return -1;
  struct br_path_beneath_attr attr = {.allowed_access = allowed, .parent_fd = fd};
  long rc = syscall(__NR_landlock_add_rule, ruleset, BR_RULE_PATH_BENEATH, &attr, 0);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc < 0 ? -1 : 0;
}

#define BR_RULE_NET_PORT 2
struct br_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
} __attribute__((packed));

#define MAX_DENY_PORTS 64
#define MAX_HIDDEN 16
#define MAX_WRITABLE 4
#define MAX_SYSTEM_DIRS 32
#define MAX_CGROUPS 4

/* The system directories a workspace run sees (--view) and may read (Landlock), unless given. */
/* --separate-stderr: the command keeps its own stderr (a protocol server speaks on stdout). */
static int separate_stderr = 0;

static const char *const DEFAULT_SYSTEM_DIRS[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"};
/* The device nodes of a view's /dev (bind-mounted from the host's), readable in every workspace run. */
static const char *const VIEW_DEVICES[] = {"null", "zero", "full", "random", "urandom", "tty"};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* What the Landlock domain lets the command do. */
struct policy {
  int restricted;                         /* read-only filesystem, no network */
  int host_write;                         /* Unrestricted: no filesystem restriction */
  const char *writable[MAX_WRITABLE];     /* Unrestricted workspace/scratch, Restricted scratch */
  int nwritable;
  unsigned deny_ports[MAX_DENY_PORTS];    /* Unrestricted: TCP connect refused to these ports */
  int ndeny;
  int net_ruleset;                        /* >= 0: a prebuilt ruleset with the port rules (holder) */
  const char *workspace;                  /* a workspace run: reads confined to the view's directories */
  int view;                               /* the mount view was built (the tool sees only those directories) */
  const char *system_dirs[MAX_SYSTEM_DIRS];
  int nsystem;
};

static int port_denied(const struct policy *p, unsigned port) {
  for (int i = 0; i < p->ndeny; i++)
    if (p->deny_ports[i] == port) return 1;
  return 0;
}

/* TCP connect allowed to every port but the denied ones: Landlock rules are allow-lists. */
static int add_port_rules(int ruleset, const struct policy *policy, char *err, size_t errlen) {
  for (unsigned port = 1; port <= 65535; port++) {
    if (port_denied(policy, port)) continue;
    struct br_net_port_attr net = {.allowed_access = BR_NET_CONNECT_TCP, .port = port};
    if (syscall(__NR_landlock_add_rule, ruleset, BR_RULE_NET_PORT, &net, 0) < 0) {
      snprintf(err, errlen, "landlock rule for TCP port %u: %s", port, strerror(errno));
      return -1;
    }
  }
  return 0;
}

/*
 * Restricted: everything readable and executable, nothing writable except /dev/null and the
 * scratch directory, TCP bind and connect denied. Unrestricted: the working directory and the
 * scratch writable (or everything with host_write), TCP connect allowed to every port but the
 * denied ones (Landlock rules are allow-lists, hence one rule per allowed port). Both: signals
 * and abstract unix sockets scoped to the sandbox (ABI >= 6), and ptrace of anything outside it
 * refused (every ABI), which keeps /proc/PID/environ of the services closed even to the same uid.
 */
static int apply_landlock(int abi, const struct policy *policy, char *err, size_t errlen) {
  uint64_t handled = fs_rights_for(abi);
  struct br_ruleset_attr attr = {.handled_access_fs = handled};
  if (abi >= 4)
    attr.handled_access_net = policy->restricted ? BR_NET_BIND_TCP | BR_NET_CONNECT_TCP : (policy->ndeny && policy->net_ruleset < 0 ? BR_NET_CONNECT_TCP : 0);
  if (abi >= 6) attr.scoped = BR_SCOPE_ABSTRACT_UNIX_SOCKET | BR_SCOPE_SIGNAL;
  /* Older kernels take a shorter struct; the fields they do not know must be zero anyway. */
  size_t size = abi >= 6 ? sizeof(attr) : abi >= 4 ? offsetof(struct br_ruleset_attr, scoped)
                                                   : offsetof(struct br_ruleset_attr, handled_access_net);
  int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) {
    snprintf(err, errlen, "landlock_create_ruleset: %s", strerror(errno));
    return -1;
  }
  uint64_t read_only = BR_FS_EXECUTE | BR_FS_READ_FILE | BR_FS_READ_DIR;
  if (policy->workspace) {
    /* A workspace run reads only what its view shows: the system directories, the workspace,
     * its scratch, a few device nodes and /proc (without the mount view, the same list is
     * the only read confinement). In the view, / itself is listable: nothing else is there. */
    if (policy->view && add_path_rule(ruleset, "/", BR_FS_READ_DIR) < 0) {
      snprintf(err, errlen, "landlock rule for /: %s", strerror(errno));
      close(ruleset);
      return -1;
    }
    for (int k = 0; k < policy->nsystem; k++) {
      if (add_path_rule(ruleset, policy->system_dirs[k], read_only) < 0 && errno != ENOENT && errno != ENOTDIR) {
        snprintf(err, errlen, "landlock rule for %s: %s", policy->system_dirs[k], strerror(errno));
        close(ruleset);
        return -1;
      }
    }
    const char *reads[] = {"/proc", "/dev"};
    for (int k = 0; k < NELEM(reads); k++) {
      if (add_path_rule(ruleset, reads[k], k == 0 ? BR_FS_READ_FILE | BR_FS_READ_DIR : BR_FS_READ_DIR) < 0) {
        snprintf(err, errlen, "landlock rule for %s: %s", reads[k], strerror(errno));
        close(ruleset);
        return -1;
      }
    }
    for (int k = 1; k < NELEM(VIEW_DEVICES); k++) {
      char dev[64];
      snprintf(dev, sizeof(dev), "/dev/%s", VIEW_DEVICES[k]);
      if (add_path_rule(ruleset, dev, BR_FS_READ_FILE) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "landlock rule for %s: %s", dev, strerror(errno));
        close(ruleset);
        return -1;
      }
    }
    if (add_path_rule(ruleset, policy->workspace, policy->restricted ? read_only : handled) < 0) {
      snprintf(err, errlen, "landlock rule for the workspace %s: %s", policy->workspace, strerror(errno));
      close(ruleset);
      return -1;
    }
  } else if (add_path_rule(ruleset, "/", policy->host_write ? handled : read_only) < 0) {
    snprintf(err, errlen, "landlock rule for /: %s", strerror(errno));
    close(ruleset);
    return -1;
  }
  uint64_t devnull = BR_FS_READ_FILE | BR_FS_WRITE_FILE | (abi >= 3 ? BR_FS_TRUNCATE : 0);
  if (add_path_rule(ruleset, "/dev/null", devnull) < 0) {
    snprintf(err, errlen, "landlock rule for /dev/null: %s", strerror(errno));
    close(ruleset);
    return -1;
  }
  for (int i = 0; i < policy->nwritable; i++) {
    if (add_path_rule(ruleset, policy->writable[i], handled) < 0) {
      snprintf(err, errlen, "landlock rule for %s: %s", policy->writable[i], strerror(errno));
      close(ruleset);
      return -1;
    }
  }
  /* No holder: build the port rules here (the slow path, about 0.1 s). */
  if (attr.handled_access_net & BR_NET_CONNECT_TCP && !policy->restricted && add_port_rules(ruleset, policy, err, errlen) < 0) {
    close(ruleset);
    return -1;
  }
  if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0) {
    snprintf(err, errlen, "landlock_restrict_self: %s", strerror(errno));
    close(ruleset);
    return -1;
  }
  close(ruleset);
  /* The port rules built once by a holder (see hold_net_ruleset): a second, stacked domain. */
  if (!policy->restricted && abi >= 4 && policy->net_ruleset >= 0 && syscall(__NR_landlock_restrict_self, policy->net_ruleset, 0) < 0) {
    snprintf(err, errlen, "landlock_restrict_self (ports): %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* The Unrestricted port rules: TCP connect allowed to every port but the denied ones. */
static int net_port_ruleset(const struct policy *policy, char *err, size_t errlen) {
  struct br_ruleset_attr attr = {.handled_access_net = BR_NET_CONNECT_TCP};
  int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, offsetof(struct br_ruleset_attr, scoped), 0);
  if (ruleset < 0) {
    snprintf(err, errlen, "landlock_create_ruleset (ports): %s", strerror(errno));
    return -1;
  }
  if (add_port_rules(ruleset, policy, err, errlen) < 0) {
    close(ruleset);
    return -1;
  }
  return ruleset;
}

/*
 * --hold-net-ruleset: builds the port rules once (65 000 landlock_add_rule calls, about 0.1 s)
 * and keeps the ruleset open, printing "ready PID FD"; each Unrestricted run then takes a copy
 * with pidfd_getfd (--net-ruleset PID:FD) instead of building its own. Lives until its stdin
 * closes or the runner dies.
 */
static int hold_net_ruleset(const struct policy *policy) {
  char err[512];
  if (landlock_abi() < 4) {
    printf("unsupported\n");
    return 0;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  int ruleset = net_port_ruleset(policy, err, sizeof(err));
  if (ruleset < 0) {
    fprintf(stderr, "bedrock-sandbox: %s\n", err);
    return 125;
  }
  printf("ready %d %d\n", (int)getpid(), ruleset);
  fflush(stdout);
  char buf[64];
  while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
  }
  return 0;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* A copy of the holder's ruleset, or -1 (the run then builds the rules itself). */
static int take_net_ruleset(const char *spec) {
  int pid = 0, fd = -1;
  if (sscanf(spec, "%d:%d", &pid, &fd) != 2 || pid <= 0 || fd < 0) return -1;
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) return -1;
  int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  close(pidfd);
  if (copy < 0) return -1;
  /* The pid may have been reused since the spec was handed out: only a ruleset will do. */
  char link[64], target[64] = "";
  snprintf(link, sizeof(link), "/proc/self/fd/%d", copy);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0 || strncmp(target, "anon_inode:[landlock-ruleset]", (size_t)n) != 0) {
    close(copy);
    return -1;
  }
  return copy;
}

/* ---- seccomp ---- */
#if defined(__x86_64__)
#define BR_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BR_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "bedrock-sandbox supports x86_64 and aarch64"
#endif

/* include/uapi/linux/btrfs.h: _IOW(0x94, n, struct btrfs_ioctl_vol_args[_v2]), both 4096 bytes. */
#define BR_BTRFS_IOC_SNAP_CREATE 0x50009401u
#define BR_BTRFS_IOC_SUBVOL_CREATE 0x5000940eu
#define BR_BTRFS_IOC_SNAP_CREATE_V2 0x50009417u
#define BR_BTRFS_IOC_SUBVOL_CREATE_V2 0x50009418u
#define BR_DENY(err) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((err) & SECCOMP_RET_DATA))
#define BR_IF_NR(nr, ret) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), ret

#define BR_NS_FLAGS \
  (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP)

/*
 * Landlock covers TCP only; this covers the rest of the network and the ways around both.
 * socket() of every family is refused with EACCES: UDP (DNS), raw, packet, netlink, and also
 * AF_UNIX, because a pathname unix socket (a Docker or database socket) would reach a writer
 * outside the sandbox and Landlock ABI 7 does not mediate connecting to one. socketpair()
 * stays allowed: it cannot reach anything. io_uring is refused because its operations bypass
 * seccomp; namespaces, bpf, perf, userfaultfd, keyrings and mounts are refused as defence in
 * depth. clone3 gets ENOSYS so that libc falls back to clone(), whose flags can be checked.
 */
static int apply_seccomp(int abi, const struct policy *policy, char *err, size_t errlen) {
  /* Landlock handles truncate(2) only from ABI 3: before that, refuse the path-based call here
   * (ftruncate needs a file opened for writing, which Landlock already refuses). */
  uint32_t truncate_nr = abi < 3 && !policy->host_write ? (uint32_t)__NR_truncate : 0xffffffffu;
  /* Unrestricted commands keep the network (TCP to the denied ports is Landlock's job). */
  uint32_t socket_nr = policy->restricted ? (uint32_t)__NR_socket : 0xffffffffu;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BR_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
      /* x32 system calls are the same calls under other numbers: refuse them all. */
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
      BR_DENY(EPERM),
#endif
      BR_IF_NR(socket_nr, BR_DENY(EACCES)),
      BR_IF_NR(truncate_nr, BR_DENY(EACCES)),
      BR_IF_NR(__NR_io_uring_setup, BR_DENY(EPERM)),
      BR_IF_NR(__NR_io_uring_enter, BR_DENY(EPERM)),
      BR_IF_NR(__NR_io_uring_register, BR_DENY(EPERM)),
      BR_IF_NR(__NR_unshare, BR_DENY(EPERM)),
      BR_IF_NR(__NR_setns, BR_DENY(EPERM)),
      BR_IF_NR(__NR_clone3, BR_DENY(ENOSYS)),
      BR_IF_NR(__NR_bpf, BR_DENY(EPERM)),
      BR_IF_NR(__NR_perf_event_open, BR_DENY(EPERM)),
      BR_IF_NR(__NR_userfaultfd, BR_DENY(EPERM)),
      BR_IF_NR(__NR_keyctl, BR_DENY(EPERM)),
      BR_IF_NR(__NR_add_key, BR_DENY(EPERM)),
      BR_IF_NR(__NR_request_key, BR_DENY(EPERM)),
      BR_IF_NR(__NR_mount, BR_DENY(EPERM)),
      BR_IF_NR(__NR_umount2, BR_DENY(EPERM)),
      BR_IF_NR(__NR_pivot_root, BR_DENY(EPERM)),
      BR_IF_NR(__NR_open_by_handle_at, BR_DENY(EPERM)),
      /* ioctl(fd, cmd): refuse making btrfs subvolumes and snapshots. Any user may make one
       * in a directory they can write, and it would get a quota group of its own outside
       * the workspace's: a way past the workspace's quota. (cmd is an unsigned int: the low
       * word of argument 1 on both little-endian arches.) */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 7),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BR_BTRFS_IOC_SNAP_CREATE, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BR_BTRFS_IOC_SUBVOL_CREATE, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BR_BTRFS_IOC_SNAP_CREATE_V2, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BR_BTRFS_IOC_SUBVOL_CREATE_V2, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BR_DENY(EPERM),
      /* clone(flags, ...): refuse new namespaces (flags are argument 0 on both arches). */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, BR_NS_FLAGS, 0, 1),
      BR_DENY(EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = (unsigned short)(sizeof(filter) / sizeof(filter[0])), .filter = filter};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
    snprintf(err, errlen, "seccomp: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* ---- capabilities ---- */
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#endif
struct br_cap_header {
  uint32_t version;
  int pid;
};
struct br_cap_data {
  uint32_t effective, permitted, inheritable;
};

/*
 * Root keeps uid 0 (so the tree stays readable) but loses every capability, for good: with
 * SECBIT_NOROOT, exec does not hand them back. Without CAP_SETPCAP (not root) the securebits
 * and bounding-set calls fail and there is nothing to drop anyway.
 */
static int drop_capabilities(char *err, size_t errlen) {
  prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED);
  for (int cap = 0; cap < 64; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL) break;
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct br_cap_header header = {.version = 0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, .pid = 0};
  struct br_cap_data data[2];
  memset(data, 0, sizeof(data));
  if (syscall(SYS_capset, &header, data) < 0) {
    snprintf(err, errlen, "capset: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* Lowering a limit needs no privilege; raising one above the current hard limit does, so a
 * request above it is clamped to it rather than failing. */
static int set_limit(int resource, unsigned long long soft, unsigned long long hard) {
  if (soft == 0) return 0;
  struct rlimit current;
  if (getrlimit(resource, &current) < 0) return -1;
  if (current.rlim_max != RLIM_INFINITY) {
    if (hard > current.rlim_max) hard = current.rlim_max;
    if (soft > current.rlim_max) soft = current.rlim_max;
  }
  struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};
  return setrlimit(resource, &rl);
}

static int join_cgroup(const char *dir, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0\n", 2) != 2) {
    snprintf(err, errlen, "joining cgroup %s: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

/*
 * Becomes the tool user: no supplementary groups, the tool gid, the tool uid (real, effective
 * and saved), so nothing of root or of the service's own uid is left. The bounding set is
 * emptied first, while CAP_SETPCAP is still held; the uid change then clears every capability
 * (checked below, not assumed).
 */
static int switch_user(long uid, long gid, char *err, size_t errlen) {
  if (uid <= 0 || gid <= 0) {
    snprintf(err, errlen, "refusing to run a tool as uid %ld gid %ld (never root)", uid, gid);
    return -1;
  }
  for (int cap = 0; cap < 64; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL) break;
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  gid_t g = (gid_t)gid;
  if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 || setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0) {
    snprintf(err, errlen,
             "cannot switch to the tool user (uid %ld, gid %ld): %s; the runner needs CAP_SETUID and CAP_SETGID "
             "(run it as root, or see BEDROCK_TOOL_UID in docs/tool-runner.md)",
             uid, gid, strerror(errno));
    return -1;
  }
  uid_t r, e, s;
  struct br_cap_header header = {.version = 0x20080522, .pid = 0};
  struct br_cap_data data[2];
  memset(data, 0, sizeof(data));
  if (getresuid(&r, &e, &s) < 0 || r != (uid_t)uid || e != (uid_t)uid || s != (uid_t)uid || syscall(SYS_capget, &header, data) < 0 ||
      data[0].effective || data[0].permitted || data[1].effective || data[1].permitted) {
    snprintf(err, errlen, "the switch to uid %ld left privileges behind", uid);
    return -1;
  }
  return 0;
}

/* The whole sandbox, in order: the tool user, no_new_privs, no capabilities, Landlock, seccomp. */
static int confine(int abi, const struct policy *policy, long uid, long gid, char *err, size_t errlen) {
  if (abi < 1 && policy->restricted) {
    snprintf(err, errlen, "Landlock is not available on this kernel");
    return -1;
  }
  if (uid >= 0 && switch_user(uid, gid, err, errlen) < 0) return -1;
  if (uid >= 0 && access(".", R_OK | X_OK) < 0) {
    char cwd[2048];
    if (!getcwd(cwd, sizeof(cwd))) snprintf(cwd, sizeof(cwd), "(the working directory)");
    snprintf(err, errlen,
             "the working directory %.300s is not readable by the tool user (uid %ld): give that user access to it "
             "(for example chown -R %ld:%ld it, or choose another BEDROCK_TOOL_UID)",
             cwd, uid, uid, gid);
    return -1;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
    snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
    return -1;
  }
  if (drop_capabilities(err, errlen) < 0) return -1;
  if (abi >= 1 && apply_landlock(abi, policy, err, errlen) < 0) return -1;
  return apply_seccomp(abi, policy, err, errlen);
}

static void json_escape(const char *s, char *out, size_t outlen) {
  size_t j = 0;
  for (; *s && j + 7 < outlen; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[j++] = '\\';
      out[j++] = (char)c;
    } else if (c < 0x20) {
      j += (size_t)snprintf(out + j, outlen - j, "\\u%04x", c);
    } else {
      out[j++] = (char)c;
    }
  }
  out[j] = 0;
}

/* Whether this process may create a private mount namespace (CAP_SYS_ADMIN), tried in a child. */
static int private_mounts_work(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0 ? 0 : 1);
  int status = 1;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Whether this process may build a view: a new pid namespace whose first process mounts a
 * fresh /proc in a private mount namespace and can pivot_root into a fresh tmpfs, tried in a
 * child and a grandchild. pivot_root is tried too because a seccomp profile may allow mount
 * and unshare but not it (containerd's RuntimeDefault with CAP_SYS_ADMIN): views would then
 * fail at every run instead of falling back to Landlock's read rules. */
static int views_work(void) {
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) _exit(1);
    pid_t init = fork();
    if (init == 0)
      _exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0 && getpid() == 1 &&
                    mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0700") == 0 &&
                    chdir("/proc") == 0 && syscall(SYS_pivot_root, ".", ".") == 0
                ? 0
                : 1);
    int st = 1;
    if (init < 0 || waitpid(init, &st, 0) < 0) _exit(1);
    _exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
  }
  int status = 1;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Whether this process can switch a child to the tool user, tried in a child. */
static int tool_user_works(long uid, long gid) {
  if (uid < 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    char err[512];
    _exit(switch_user(uid, gid, err, sizeof(err)) == 0 ? 0 : 1);
  }
  int status = 1;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Applies the whole Restricted sandbox (as the tool user, when one is given) in a child and
 * checks that a write and a socket are refused and that the uid really changed. */
static int probe(long uid, long gid) {
  int abi = landlock_abi();
  int seccomp_ok = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  char err[512] = "";
  int pipefd[2];
  if (pipe(pipefd) < 0) return 1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    char cerr[512] = "";
    struct policy restricted = {.restricted = 1};
    if (confine(abi, &restricted, uid, gid, cerr, sizeof(cerr)) == 0) {
      char path[64];
      snprintf(path, sizeof(path), "/tmp/.bedrock-sandbox-probe-%d", (int)getpid());
      int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
      if (fd >= 0) {
        close(fd);
        unlink(path);
        snprintf(cerr, sizeof(cerr), "a write was not refused");
      } else if (socket(AF_INET, SOCK_DGRAM, 0) >= 0) {
        snprintf(cerr, sizeof(cerr), "a UDP socket was not refused");
      } else if (uid >= 0 && (getuid() != (uid_t)uid || geteuid() != (uid_t)uid)) {
        snprintf(cerr, sizeof(cerr), "the tool user was not applied");
      }
    }
    ssize_t n = write(pipefd[1], cerr, strlen(cerr));
    (void)n;
    _exit(0);
  }
  close(pipefd[1]);
  ssize_t n = read(pipefd[0], err, sizeof(err) - 1);
  err[n > 0 ? n : 0] = 0;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) && !err[0]) snprintf(err, sizeof(err), "probe child died (status %d)", status);
  char escaped[1024];
  json_escape(err, escaped, sizeof(escaped));
  printf("{\"landlock_abi\":%d,\"seccomp\":%s,\"sandbox\":%s,\"tool_uid\":%ld,\"private_mounts\":%s,\"views\":%s,\"error\":\"%s\"}\n",
         abi, seccomp_ok ? "true" : "false", err[0] ? "false" : "true", tool_user_works(uid, gid) ? uid : -1L,
         private_mounts_work() ? "true" : "false", views_work() ? "true" : "false", escaped);
  return 0;
}

/* fd on which the supervisor reports the command's process group ("pgid N\n"), if open. */
#define REPORT_FD 3

/* SIGKILLs every direct child of this process (orphans of the tree land here: subreaper).
 * /proc/PID/task/PID/children is cheap; without it (CONFIG_PROC_CHILDREN off), scan /proc. */
static void kill_children(pid_t self) {
  char list_path[64];
  snprintf(list_path, sizeof(list_path), "/proc/%d/task/%d/children", (int)self, (int)self);
  FILE *list = fopen(list_path, "re");
  if (list) {
    int pid;
    while (fscanf(list, "%d", &pid) == 1) kill(pid, SIGKILL);
    fclose(list);
    return;
  }
  DIR *proc = opendir("/proc");
  if (!proc) return;
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", entry->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'. */
    char *rparen = strrchr(buf, ')');
    char state;
    int ppid;
    if (rparen && sscanf(rparen + 1, " %c %d", &state, &ppid) == 2 && ppid == self) kill(atoi(entry->d_name), SIGKILL);
  }
  closedir(proc);
}

/*
 * Waits for the command, reaping every process of its tree the moment it dies (so "the
 * process group is gone" follows a kill within milliseconds, whatever PID 1 does). When the
 * command exits, whatever it left running is killed: nothing outlives the tool. Exits with
 * the command's status, or dies of the signal that killed it.
 */
static volatile pid_t supervised_group = 0;

/* SIGTERM, SIGINT, SIGHUP, or the runner dying (PR_SET_PDEATHSIG): take the tree down. */
static void on_terminate(int sig) {
  (void)sig;
  if (supervised_group > 0) kill(-supervised_group, SIGKILL);
}

static int supervise(pid_t child) {
  supervised_group = child;
  char report[32];
  int len = snprintf(report, sizeof(report), "pgid %d\n", (int)child);
  if (write(REPORT_FD, report, (size_t)len) == len) close(REPORT_FD);
  pid_t self = getpid();
  int status = 0, child_status = 0, child_done = 0;
  for (;;) {
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: the whole tree is gone */
    }
    if (pid == child) {
      child_status = status;
      child_done = 1;
    }
    if (child_done) {
      kill(-child, SIGKILL);
      kill_children(self);
    }
  }
  return child_status;
}

/* Exits the way the command did: its status, or death by its signal. */
static int mirror(int child_status) {
  if (WIFSIGNALED(child_status)) {
    int sig = WTERMSIG(child_status);
    signal(sig, SIG_DFL);
    kill(getpid(), sig);
    return 128 + sig;
  }
  return WEXITSTATUS(child_status);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

/* Makes DIR/name for the tool user, private to it. */
static int make_private_dir(const char *base, const char *name, long uid, long gid, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/%s", base, name);
  if (mkdir(out, 0700) < 0 && errno != EEXIST) return -1;
  if (uid >= 0 && chown(out, (uid_t)uid, (gid_t)gid) < 0) return -1;
  return chmod(out, 0700);
}

static int fail(const char *what) {
  fprintf(stderr, "bedrock-sandbox: %s\n", what);
  return 125;
}

static unsigned long long parse_number(const char *s, int *ok) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  *ok = errno == 0 && end && *end == 0 && s[0] != '-';
  return v;
}

/* fd on which a pre-started helper (--await-args) receives its run: "CWD\0ARG\0ARG\0...\0". */
#define ARGS_FD 4
#define ARGS_MAX (8u << 20)

/* Set when this process already joined the run's cgroup (--await-args): its child inherits it. */
static int cgroup_joined = 0;

/*
 * A helper started ahead of its run (the runner keeps a few ready): joins its own fresh
 * cgroup now (one directory per hierarchy), because a migration between cgroups waits for an RCU grace period (about 10 ms)
 * that would otherwise be on the run's critical path, says "ready" on fd 3, then waits for the
 * run's working directory and arguments on fd 4 (NUL-terminated strings, until EOF). The
 * supervisor then stays in that cgroup too (one task more than the command's own; the runner
 * raises pids.max by one); the command inherits it at fork. Returns 0 with *argcp and *argvp set to
 * the run's arguments as if given on the command line, 1 when the runner closed fd 4 without
 * sending any (no longer needed: exit quietly), 125 on failure.
 */
static int await_args(int *argcp, char ***argvp) {
  char **argv = *argvp;
  /* One --cgroup per hierarchy (cgroup v1 has one each for pids, memory and cpu). */
  for (int k = 2; k < *argcp; k += 2) {
    if (k + 1 >= *argcp || strcmp(argv[k], "--cgroup") != 0) return fail("usage: bedrock-sandbox --await-args [--cgroup DIR]...");
    char err[512];
    if (join_cgroup(argv[k + 1], err, sizeof(err)) < 0) return fail(err);
    cgroup_joined = 1;
  }
  ssize_t said = write(REPORT_FD, "ready\n", 6);
  (void)said;
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  if (!buf) return fail("out of memory");
  for (;;) {
    if (len == cap) {
      if (cap >= ARGS_MAX) return fail("the arguments are too long");
      cap *= 2;
      char *bigger = realloc(buf, cap);
      if (!bigger) return fail("out of memory");
      buf = bigger;
    }
    ssize_t n = read(ARGS_FD, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot read the arguments");
    if (n == 0) break;
    len += (size_t)n;
  }
  close(ARGS_FD);
  if (len == 0) return 1;
  if (buf[len - 1] != 0) return fail("malformed arguments");
  int count = 0;
  for (size_t k = 0; k < len; k++) count += buf[k] == 0;
  if (count < 2) return fail("malformed arguments");
  char **args = calloc((size_t)count + 1, sizeof(char *));
  if (!args) return fail("out of memory");
  args[0] = argv[0];
  char *cursor = buf;
  const char *cwd = cursor;
  cursor += strlen(cursor) + 1;
  for (int k = 1; k < count; k++) {
    args[k] = cursor;
    cursor += strlen(cursor) + 1;
  }
  args[count] = NULL;
  if (chdir(cwd) < 0) {
    char msg[600];
    snprintf(msg, sizeof(msg), "cannot enter the working directory %.400s: %s", cwd, strerror(errno));
    return fail(msg);
  }
  *argcp = count;
  *argvp = args;
  return 0;
}

/* mkdir -p, each new directory root's and 0755 (the mount points of a view). */
static int make_dirs(const char *path) {
  char buf[4200];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Bind-mounts SRC on DST (made if missing), then makes it nosuid, nodev and (ro) read-only. */
static int bind_into(const char *src, const char *dst, int ro, int is_file, char *err, size_t errlen) {
  if (is_file) {
    int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  } else if (make_dirs(dst) < 0) {
    snprintf(err, errlen, "view: cannot make %.300s: %s", dst, strerror(errno));
    return -1;
  }
  if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0 ||
      (!is_file && mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0), NULL) < 0)) {
    snprintf(err, errlen, "view: cannot bind %.300s: %s", src, strerror(errno));
    return -1;
  }
  return 0;
}

/*
 * The tool's view (--view), built by the first process of the run's new pid namespace in a
 * new mount namespace: a fresh tmpfs becomes / and holds only the system directories
 * (read-only binds; symlinked ones such as /bin -> usr/bin recreated as symlinks), a /dev of
 * a few device nodes, a fresh /proc of this pid namespace, the run's scratch tmpfs as /tmp
 * (with HOME /tmp/home; sized by --scratch-size and --scratch-inodes) and the workspace at its
 * own absolute path (read-only in Restricted mode). pivot_root then drops the host's tree:
 * other workspaces, data directories, the services' files are not there at all.
 */
static int build_view(const char *root, const struct policy *policy, long uid, long gid, const char *scratch_opts, const char *cwd,
                      char *err, size_t errlen) {
  char dst[4200];
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    snprintf(err, errlen, "view: cannot make a private mount namespace: %s", strerror(errno));
    return -1;
  }
  if (mount("bedrock-view", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096") < 0) {
    snprintf(err, errlen, "view: cannot mount its root on %.300s: %s", root, strerror(errno));
    return -1;
  }
  /* The scratch first: a system directory or the workspace under /tmp then lands on it (made
   * inside it), never in the way of its mount point. */
  snprintf(dst, sizeof(dst), "%s/tmp", root);
  char opts[256];
  snprintf(opts, sizeof(opts), "mode=0700%s", scratch_opts);
  if (uid >= 0) snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), ",uid=%ld,gid=%ld", uid, gid);
  if (mkdir(dst, 0755) < 0 || mount("bedrock-scratch", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
    snprintf(err, errlen, "view: cannot mount the scratch on /tmp: %s", strerror(errno));
    return -1;
  }
  snprintf(dst, sizeof(dst), "%s/tmp/home", root);
  if (mkdir(dst, 0700) < 0 || (uid >= 0 && chown(dst, (uid_t)uid, (gid_t)gid) < 0)) {
    snprintf(err, errlen, "view: cannot make the home directory: %s", strerror(errno));
    return -1;
  }
  for (int k = 0; k < policy->nsystem; k++) {
    const char *dir = policy->system_dirs[k];
    struct stat st;
    if (lstat(dir, &st) < 0) continue; /* only those that exist */
    snprintf(dst, sizeof(dst), "%s%s", root, dir);
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(dir, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = 0;
      if (symlink(target, dst) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "view: cannot link %.300s: %s", dir, strerror(errno));
        return -1;
      }
    } else if (S_ISDIR(st.st_mode) && bind_into(dir, dst, 1, 0, err, errlen) < 0) {
      return -1;
    }
  }
  snprintf(dst, sizeof(dst), "%s/dev", root);
  if (mkdir(dst, 0755) < 0 || mount("bedrock-dev", dst, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16k,nr_inodes=64") < 0) {
    snprintf(err, errlen, "view: cannot make /dev: %s", strerror(errno));
    return -1;
  }
  /* The host's nodes, same numbers and modes: mknod (cheaper than a bind mount each), or a bind
   * where mknod is not allowed. */
  for (int k = 0; k < NELEM(VIEW_DEVICES); k++) {
    char src[64];
    struct stat st;
    snprintf(src, sizeof(src), "/dev/%s", VIEW_DEVICES[k]);
    if (stat(src, &st) < 0 || !S_ISCHR(st.st_mode)) continue;
    snprintf(dst, sizeof(dst), "%s/dev/%s", root, VIEW_DEVICES[k]);
    if (mknod(dst, S_IFCHR | (st.st_mode & 07777), st.st_rdev) == 0) {
      chmod(dst, st.st_mode & 07777);
      continue;
    }
    if (bind_into(src, dst, 0, 1, err, errlen) < 0) return -1;
  }
  const char *links[][2] = {{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
                            {"stderr", "/proc/self/fd/2"}, {"shm", "/tmp"}};
  for (int k = 0; k < NELEM(links); k++) {
    snprintf(dst, sizeof(dst), "%s/dev/%s", root, links[k][0]);
    if (symlink(links[k][1], dst) < 0) {
      snprintf(err, errlen, "view: cannot link /dev/%s: %s", links[k][0], strerror(errno));
      return -1;
    }
  }
  snprintf(dst, sizeof(dst), "%s/dev", root);
  mount(NULL, dst, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL);
  snprintf(dst, sizeof(dst), "%s/proc", root);
  if (mkdir(dst, 0555) < 0 || mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
    snprintf(err, errlen, "view: cannot mount /proc of the run's pid namespace: %s", strerror(errno));
    return -1;
  }
  /* Last: a workspace under /tmp lands on the scratch, not under it. */
  snprintf(dst, sizeof(dst), "%s%s", root, policy->workspace);
  if (bind_into(policy->workspace, dst, policy->restricted, 0, err, errlen) < 0) return -1;
  if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
    snprintf(err, errlen, "view: pivot_root: %s", strerror(errno));
    return -1;
  }
  mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
  if (chdir(cwd) < 0) {
    snprintf(err, errlen, "view: cannot enter the working directory %.300s: %s", cwd, strerror(errno));
    return -1;
  }
  return 0;
}

/* The command's own process: limits, the sandbox, exec. Never returns. */
static void run_tool(char **argv, const struct policy *policy, long uid, long gid, pid_t parent, int max_abi, const char *net_ruleset_spec,
                     const unsigned long long limits[5], const char *tmp_dir, const char *home_dir, const char *scratch) {
  char err[512] = "";
  struct policy copy = *policy;
  if (set_limit(RLIMIT_AS, limits[0], limits[0]) < 0) _exit(fail("setrlimit(RLIMIT_AS) failed"));
  if (set_limit(RLIMIT_CPU, limits[1], limits[1] + 5) < 0) _exit(fail("setrlimit(RLIMIT_CPU) failed"));
  if (set_limit(RLIMIT_NPROC, limits[2], limits[2]) < 0) _exit(fail("setrlimit(RLIMIT_NPROC) failed"));
  if (set_limit(RLIMIT_FSIZE, limits[3], limits[3]) < 0) _exit(fail("setrlimit(RLIMIT_FSIZE) failed"));
  if (set_limit(RLIMIT_NOFILE, limits[4], limits[4]) < 0) _exit(fail("setrlimit(RLIMIT_NOFILE) failed"));
  int abi = landlock_abi();
  if (max_abi >= 0 && abi > max_abi) abi = max_abi;
  /* Taken while still privileged: pidfd_getfd needs ptrace rights over the holder. */
  if (net_ruleset_spec && !copy.restricted && copy.ndeny) copy.net_ruleset = take_net_ruleset(net_ruleset_spec);
  if (confine(abi, &copy, uid, gid, err, sizeof(err)) < 0) _exit(fail(err));
  /* A change of uid clears the parent-death signal: set it again. */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != parent) _exit(125);
  if (tmp_dir[0]) {
    setenv("TMPDIR", tmp_dir, 1);
    setenv("HOME", home_dir, 1);
  } else if (scratch) {
    setenv("TMPDIR", scratch, 1);
  }
  close(REPORT_FD);
  if (!separate_stderr && dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(fail("dup2 failed"));
  execvp(argv[0], argv);
  /* stderr is stdout now: the message lands in the tool's output, where it belongs. */
  fprintf(stderr, "bedrock-sandbox: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--await-args") == 0) {
    int waited = await_args(&argc, &argv);
    if (waited) return waited == 1 ? 0 : waited;
  }
  int restricted = 0, do_probe = 0, do_hold = 0, view = 0;
  const char *net_ruleset_spec = NULL;
  int max_abi = -1;
  long uid = -1, gid = -1;
  const char *scratch = NULL, *private_tmp = NULL, *workspace = NULL;
  const char *cgroups[MAX_CGROUPS];
  int ncgroups = 0;
  const char *hidden[MAX_HIDDEN];
  int nhidden = 0;
  struct policy policy;
  memset(&policy, 0, sizeof(policy));
  policy.net_ruleset = -1;
  unsigned long long mem = 0, cpu = 0, nproc = 0, fsize = 0, nofile = 0, scratch_size = 0, scratch_inodes = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    int ok = 1;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--probe") == 0) {
      do_probe = 1;
    } else if (strcmp(a, "--hold-net-ruleset") == 0) {
      do_hold = 1;
    } else if (i + 1 < argc && strcmp(a, "--net-ruleset") == 0) {
      net_ruleset_spec = argv[++i];
    } else if (strcmp(a, "--restricted") == 0) {
      restricted = 1;
    } else if (strcmp(a, "--view") == 0) {
      view = 1;
    } else if (strcmp(a, "--separate-stderr") == 0) {
      separate_stderr = 1;
    } else if (i + 1 < argc && strcmp(a, "--workspace") == 0) {
      workspace = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--system-dir") == 0) {
      if (policy.nsystem == MAX_SYSTEM_DIRS) return fail("too many --system-dir paths");
      if (argv[i + 1][0] != '/') return fail("--system-dir takes absolute paths");
      policy.system_dirs[policy.nsystem++] = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--max-abi") == 0) {
      max_abi = (int)parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--scratch") == 0) {
      scratch = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--private-tmp") == 0) {
      private_tmp = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--scratch-size") == 0) {
      scratch_size = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--scratch-inodes") == 0) {
      scratch_inodes = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--hide") == 0) {
      if (nhidden == MAX_HIDDEN) return fail("too many --hide paths");
      hidden[nhidden++] = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--uid") == 0) {
      uid = (long)parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--gid") == 0) {
      gid = (long)parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--write-scope") == 0) {
      const char *scope = argv[++i];
      if (strcmp(scope, "host") == 0) policy.host_write = 1;
      else if (strcmp(scope, "workspace") != 0) return fail("--write-scope is workspace or host");
    } else if (i + 1 < argc && strcmp(a, "--deny-port") == 0) {
      unsigned long long port = parse_number(argv[++i], &ok);
      if (ok && (port < 1 || port > 65535)) ok = 0;
      if (policy.ndeny == MAX_DENY_PORTS) return fail("too many --deny-port values");
      policy.deny_ports[policy.ndeny++] = (unsigned)port;
    } else if (i + 1 < argc && strcmp(a, "--cgroup") == 0) {
      if (ncgroups == MAX_CGROUPS) return fail("too many --cgroup directories");
      cgroups[ncgroups++] = argv[++i];
    } else if (i + 1 < argc && strcmp(a, "--mem") == 0) {
      mem = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--cpu") == 0) {
      cpu = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--nproc") == 0) {
      nproc = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--fsize") == 0) {
      fsize = parse_number(argv[++i], &ok);
    } else if (i + 1 < argc && strcmp(a, "--nofile") == 0) {
      nofile = parse_number(argv[++i], &ok);
    } else {
      fprintf(stderr, "bedrock-sandbox: unknown option %s\n", a);
      return 125;
    }
    if (!ok) return fail("option values are non-negative integers (ports 1..65535)");
  }
  if ((uid >= 0) != (gid >= 0)) return fail("--uid and --gid go together");
  if (do_probe) return probe(uid, gid);
  if (do_hold) return hold_net_ruleset(&policy);
  if (i >= argc) return fail("usage: bedrock-sandbox [--restricted] [--uid N --gid N] [--private-tmp DIR] [limits] -- PROGRAM [ARGS...]");
  policy.restricted = restricted;
  if (restricted) policy.host_write = 0;

  /* A workspace run: reads confined to the view's directories; the working directory must be
   * inside the workspace (compared as real paths, so that it is the same path in the view). */
  char cwd[4096] = "";
  if (workspace) {
    char *real = realpath(workspace, NULL);
    if (!real || strcmp(real, "/") == 0) {
      char msg[600];
      snprintf(msg, sizeof(msg), "the workspace %.400s is not usable: %s", workspace, real ? "it is /" : strerror(errno));
      return fail(msg);
    }
    policy.workspace = real;
    policy.host_write = 0;
    if (policy.nsystem == 0)
      for (int k = 0; k < NELEM(DEFAULT_SYSTEM_DIRS); k++) policy.system_dirs[policy.nsystem++] = DEFAULT_SYSTEM_DIRS[k];
    size_t wl = strlen(real);
    if (!getcwd(cwd, sizeof(cwd)) || strncmp(cwd, real, wl) != 0 || (cwd[wl] != 0 && cwd[wl] != '/')) {
      char msg[9000];
      snprintf(msg, sizeof(msg), "the working directory %.4000s is outside the workspace %.4000s", cwd, real);
      return fail(msg);
    }
  }
  if (view && (!workspace || !private_tmp)) return fail("--view needs --workspace and --private-tmp");
  policy.view = view;
  char scratch_opts[96] = "";
  if (scratch_size) snprintf(scratch_opts, sizeof(scratch_opts), ",size=%llu", scratch_size);
  if (scratch_inodes) snprintf(scratch_opts + strlen(scratch_opts), sizeof(scratch_opts) - strlen(scratch_opts), ",nr_inodes=%llu", scratch_inodes);

  /* The run's scratch, before the fork so that the supervisor can remove a fallback directory:
   * a tmpfs in a private mount namespace when this process may mount (root), seen by this run
   * only and gone with it; otherwise a fresh directory under DIR. With --view the scratch is
   * the view's /tmp, mounted by the first process of the pid namespace (build_view). */
  char base[4096] = "", tmp_dir[4200] = "", home_dir[4200] = "";
  int fallback_dir = 0;
  if (view) {
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp");
    snprintf(home_dir, sizeof(home_dir), "/tmp/home");
    policy.writable[policy.nwritable++] = "/tmp";
  } else if (private_tmp) {
    char opts[160];
    snprintf(opts, sizeof(opts), "mode=0711%s", scratch_opts);
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0 &&
        mount("bedrock-scratch", private_tmp, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0) {
      snprintf(base, sizeof(base), "%s", private_tmp);
      for (int h = 0; h < nhidden; h++) {
        if (mount("bedrock-hidden", hidden[h], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k") < 0 && errno != ENOENT &&
            errno != ENOTDIR) {
          char msg[4400];
          snprintf(msg, sizeof(msg), "cannot hide %s: %s", hidden[h], strerror(errno));
          return fail(msg);
        }
      }
    } else {
      snprintf(base, sizeof(base), "%s/bedrock-run-XXXXXX", private_tmp);
      if (!mkdtemp(base)) return fail("cannot create the scratch directory");
      chmod(base, 0711);
      fallback_dir = 1;
    }
    if (make_private_dir(base, "tmp", uid, gid, tmp_dir, sizeof(tmp_dir)) < 0 ||
        make_private_dir(base, "home", uid, gid, home_dir, sizeof(home_dir)) < 0) {
      if (fallback_dir) nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
      return fail("cannot prepare the scratch directory");
    }
    policy.writable[policy.nwritable++] = base;
  }
  if (scratch) policy.writable[policy.nwritable++] = scratch;
  if (!restricted && !policy.host_write && !workspace) policy.writable[policy.nwritable++] = ".";

  /* A view runs in a new pid namespace: the supervisor's next child is its first process (its
   * "init": it builds the view, forks the command, reaps orphans, and its death takes every
   * process of the namespace with it). The command's status comes back on `relay`, because
   * that first process cannot die of a signal sent by itself. */
  int relay[2] = {-1, -1};
  if (view) {
    if (unshare(CLONE_NEWPID) < 0) {
      char msg[300];
      snprintf(msg, sizeof(msg), "cannot create the run's pid namespace (the view needs CAP_SYS_ADMIN): %s", strerror(errno));
      return fail(msg);
    }
    if (pipe2(relay, O_CLOEXEC) < 0) return fail("pipe failed");
  }

  /* The supervisor (this process) stays outside the command's session and sandbox and reaps
   * every process of the tree as soon as it dies; see supervise(). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) return fail("cannot become a child subreaper");
  struct rlimit nocore = {0, 0};
  setrlimit(RLIMIT_CORE, &nocore);
  pid_t supervisor = getpid();
  /* If the runner dies, the supervisor gets SIGTERM and kills the tree instead of leaving it
   * running unsupervised. Installed before fork so that no window is left uncovered. */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  if (getppid() != parent) return fail("the runner went away");
  unsigned long long limits[5] = {mem, cpu, nproc, fsize, nofile};
  pid_t child = fork();
  if (child < 0) return fail("fork failed");
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    /* Own session and process group: the group the runner kills on timeout and cancel. */
    if (setsid() < 0) _exit(fail("setsid failed"));
    /* If the supervisor dies (runner killed), the command goes with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* In a new pid namespace the parent (outside it) shows as pid 0. */
    if (getppid() != (view ? 0 : supervisor)) _exit(125);
    char err[512] = "";
    for (int k = 0; k < ncgroups && !cgroup_joined; k++)
      if (join_cgroup(cgroups[k], err, sizeof(err)) < 0) _exit(fail(err));
    if (!view) run_tool(argv + i, &policy, uid, gid, supervisor, max_abi, net_ruleset_spec, limits, tmp_dir, home_dir, scratch);
    close(relay[0]);
    close(REPORT_FD);
    if (build_view(private_tmp, &policy, uid, gid, scratch_opts, cwd, err, sizeof(err)) < 0) _exit(fail(err));
    pid_t tool = fork();
    if (tool < 0) _exit(fail("fork failed"));
    if (tool == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (getppid() != 1) _exit(125);
      run_tool(argv + i, &policy, uid, gid, 1, max_abi, net_ruleset_spec, limits, tmp_dir, home_dir, scratch);
    }
    /* The namespace's init: reap orphans until the command ends, relay its status, and go:
     * the kernel then kills whatever else is left in the namespace. */
    for (;;) {
      int st = 0;
      pid_t pid = waitpid(-1, &st, 0);
      if (pid < 0 && errno == EINTR) continue;
      if (pid < 0) _exit(125);
      if (pid == tool) {
        ssize_t n = write(relay[1], &st, sizeof(st));
        _exit(n == (ssize_t)sizeof(st) ? 0 : 125);
      }
    }
  }
  if (view) close(relay[1]);
  int status = supervise(child);
  if (view) {
    int st;
    if (read(relay[0], &st, sizeof(st)) == (ssize_t)sizeof(st)) status = st;
  }
  if (fallback_dir) nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return mirror(status);
}
