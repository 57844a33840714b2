/*
 * bedrock-snapshot: btrfs snapshots by their ioctl, for checkpoints (docs/workspaces.md,
 * "Checkpoints"). Spawning `btrfs subvolume snapshot` costs a btrfs-progs start-up (its
 * libraries, its argument checks, a sysfs read) on every checkpoint; this is one ioctl per
 * snapshot, in a process that stays up.
 *
 *   bedrock-snapshot --serve
 *       Reads requests on stdin, one a line, fields separated by a tab:
 *         snap <ro:0|1> <qgroup level/id or -> <source> <dest>
 *         excl <path>
 *         qgroup <path> <level/id>
 *         destroy <path>
 *         limit <path> <bytes>
 *         info <path>
 *       and answers one line each: "ok <microseconds>" (snap), "ok <subvolume id> <bytes>" (excl:
 *       the exclusive bytes of the subvolume at path, its level-0 qgroup's, as `btrfs qgroup show`
 *       gives them), "ok <referenced bytes> <exclusive bytes>" (qgroup: that qgroup's, on the
 *       filesystem of path; 0 0 when it does not exist), "ok <microseconds>" (destroy: the
 *       subvolume at path deleted, BTRFS_IOC_SNAP_DESTROY; the kernel frees its blocks in the
 *       background; one holding other subvolumes is refused, ENOTEMPTY), "ok" (limit: the
 *       referenced bytes of the subvolume at path limited, as `btrfs qgroup limit BYTES path`
 *       does: BTRFS_IOC_QGROUP_LIMIT, issued on the parent directory naming the subvolume's qgroup, so
 *       that its transaction is not charged to the subvolume: a workspace whose family is at its
 *       quota can still be limited), "ok <subvolume id> <creation seconds> <nanoseconds>" (info:
 *       BTRFS_IOC_GET_SUBVOL_INFO; the creation time is the subvolume's own, where a snapshot's
 *       root directory keeps its source's birth time), or "err <errno name>: <message>". Ends at EOF. Paths are absolute and may not
 *       hold a tab or a newline.
 *   bedrock-snapshot [-r] [-i LEVEL/ID] SOURCE DEST
 *       One snapshot, then exits (0, or 1 with the error on stderr).
 *   bedrock-snapshot --time [-r] [-i LEVEL/ID] SOURCE DEST
 *       The same, printing how long the ioctl alone took, in microseconds (benchmarks: the
 *       kernel's floor).
 *   bedrock-snapshot --enable-simple-quota PATH
 *       Turns on btrfs's simple quotas on the filesystem of PATH (BTRFS_IOC_QUOTA_CTL with
 *       BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA, Linux 6.7+), which btrfs-progs before 6.7 cannot
 *       do: each extent is charged to the subvolume that wrote it, and no transaction commit
 *       walks back references. Exits 0, or 1 with the error on stderr (EINVAL: a kernel
 *       without them).
 *
 * The snapshot: BTRFS_IOC_SNAP_CREATE_V2 on DEST's parent directory, naming DEST's last
 * component, with SOURCE's subvolume as the source; -r makes it read-only (BTRFS_SUBVOL_RDONLY);
 * -i puts it into that qgroup (BTRFS_SUBVOL_QGROUP_INHERIT), as `btrfs subvolume snapshot -i`
 * does. The kernel takes the snapshot in one transaction: it exists whole or not at all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4 /* linux/btrfs.h of Linux 6.7; older headers lack it */
#endif

static int parse_qgroup(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long level = strtoull(s, &end, 10);
  if (errno || end == s || *end != '/' || level > 0xffff) return -1;
  const char *rest = end + 1;
  unsigned long long id = strtoull(rest, &end, 10);
  if (errno || end == rest || *end != '\0' || id >= (1ULL << 48)) return -1;
  *out = ((uint64_t)level << 48) | id;
  return 0;
}

/* Takes the snapshot; 0, or -1 with errno set and *what saying which step failed. */
static int snapshot(const char *source, const char *dest, int readonly, const char *qgroup, long *micros, const char **what) {
  struct {
    struct btrfs_qgroup_inherit inherit;
    uint64_t qgroups[1];
  } inherit;
  struct btrfs_ioctl_vol_args_v2 args;
  memset(&inherit, 0, sizeof inherit);
  memset(&args, 0, sizeof args);
  if (qgroup) {
    if (parse_qgroup(qgroup, &inherit.qgroups[0]) != 0) {
      *what = "the qgroup is not LEVEL/ID";
      errno = EINVAL;
      return -1;
    }
    inherit.inherit.num_qgroups = 1;
    args.flags |= BTRFS_SUBVOL_QGROUP_INHERIT;
    args.size = sizeof inherit;
    args.qgroup_inherit = &inherit.inherit;
  }
  if (readonly) args.flags |= BTRFS_SUBVOL_RDONLY;
  const char *slash = strrchr(dest, '/');
  if (dest[0] != '/' || source[0] != '/' || !slash || slash[1] == '\0' || strlen(slash + 1) > BTRFS_SUBVOL_NAME_MAX) {
    *what = "the paths must be absolute and DEST must name a new entry";
    errno = EINVAL;
    return -1;
  }
  strcpy(args.name, slash + 1);
  char parent[4096];
  size_t plen = slash == dest ? 1 : (size_t)(slash - dest);
  if (plen >= sizeof parent) {
    *what = "DEST is too long";
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(parent, dest, plen);
  parent[plen] = '\0';
  int src = open(source, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0) {
    *what = "opening SOURCE";
    return -1;
  }
  int dir = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    int e = errno;
    close(src);
    errno = e;
    *what = "opening DEST's directory";
    return -1;
  }
  args.fd = src;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = ioctl(dir, BTRFS_IOC_SNAP_CREATE_V2, &args);
  int e = errno;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  close(src);
  close(dir);
  *micros = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000L;
  if (rc != 0) {
    errno = e;
    *what = "the snapshot ioctl (BTRFS_IOC_SNAP_CREATE_V2)";
    return -1;
  }
  return 0;
}

/* A qgroup's referenced and exclusive bytes, from its info item in the quota tree (BTRFS_IOC_TREE_SEARCH through fd); 0 0 when it has none. */
static int qgroup_info(int fd, uint64_t qgroupid, uint64_t *rfer, uint64_t *excl, const char **what) {
  struct btrfs_ioctl_search_args search;
  memset(&search, 0, sizeof search);
  search.key.tree_id = BTRFS_QUOTA_TREE_OBJECTID;
  search.key.min_type = search.key.max_type = BTRFS_QGROUP_INFO_KEY;
  search.key.min_offset = search.key.max_offset = qgroupid;
  search.key.max_transid = UINT64_MAX;
  search.key.nr_items = 1;
  *rfer = *excl = 0;
  if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &search) != 0) {
    *what = "reading the qgroup (BTRFS_IOC_TREE_SEARCH)";
    return -1;
  }
  if (search.key.nr_items == 0) return 0; /* no such qgroup (or quotas off) */
  const struct btrfs_ioctl_search_header *h = (const void *)search.buf;
  if (h->type != BTRFS_QGROUP_INFO_KEY || h->offset != qgroupid || h->len < sizeof(struct btrfs_qgroup_info_item)) return 0;
  struct btrfs_qgroup_info_item item;
  memcpy(&item, search.buf + sizeof *h, sizeof item);
  *rfer = le64toh(item.rfer);
  *excl = le64toh(item.excl);
  return 0;
}

/* The subvolume id of the directory at path and its level-0 qgroup's exclusive bytes (BTRFS_IOC_INO_LOOKUP, then the quota tree). */
static int exclusive(const char *path, uint64_t *subvol, uint64_t *bytes, const char **what) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *what = "opening the subvolume";
    return -1;
  }
  struct btrfs_ioctl_ino_lookup_args lookup;
  memset(&lookup, 0, sizeof lookup);
  lookup.objectid = BTRFS_FIRST_FREE_OBJECTID;
  if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lookup) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    *what = "reading its subvolume id (BTRFS_IOC_INO_LOOKUP)";
    return -1;
  }
  uint64_t rfer = 0;
  int rc = qgroup_info(fd, lookup.treeid, &rfer, bytes, what);
  int e = errno;
  close(fd);
  errno = e;
  *subvol = lookup.treeid;
  return rc;
}

/* Deletes the subvolume at path (absolute): BTRFS_IOC_SNAP_DESTROY on its parent directory, naming it. */
static int destroy(const char *path, long *micros, const char **what) {
  const char *slash = strrchr(path, '/');
  struct btrfs_ioctl_vol_args args;
  memset(&args, 0, sizeof args);
  if (path[0] != '/' || !slash || slash[1] == '\0' || strlen(slash + 1) > BTRFS_PATH_NAME_MAX) {
    *what = "the path must be absolute and name a subvolume";
    errno = EINVAL;
    return -1;
  }
  strcpy(args.name, slash + 1);
  char parent[4096];
  size_t plen = slash == path ? 1 : (size_t)(slash - path);
  if (plen >= sizeof parent) {
    *what = "the path is too long";
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(parent, path, plen);
  parent[plen] = '\0';
  int dir = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    *what = "opening its directory";
    return -1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = ioctl(dir, BTRFS_IOC_SNAP_DESTROY, &args);
  int e = errno;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  close(dir);
  *micros = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000L;
  if (rc != 0) {
    errno = e;
    *what = "the delete ioctl (BTRFS_IOC_SNAP_DESTROY)";
    return -1;
  }
  return 0;
}

static int serve(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  setvbuf(stdout, NULL, _IOLBF, 0);
  while ((n = getline(&line, &cap, stdin)) > 0) {
    if (line[n - 1] == '\n') line[--n] = '\0';
    char *fields[5];
    int count = 0;
    char *save = NULL;
    for (char *f = strtok_r(line, "\t", &save); f && count < 5; f = strtok_r(NULL, "\t", &save)) fields[count++] = f;
    if (count == 2 && strcmp(fields[0], "excl") == 0) {
      uint64_t subvol = 0, bytes = 0;
      const char *what = "";
      if (exclusive(fields[1], &subvol, &bytes, &what) != 0)
        printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?", what, strerror(errno));
      else
        printf("ok %llu %llu\n", (unsigned long long)subvol, (unsigned long long)bytes);
      continue;
    }
    if (count == 3 && strcmp(fields[0], "limit") == 0) {
      struct btrfs_ioctl_qgroup_limit_args limit;
      memset(&limit, 0, sizeof limit);
      char *end;
      errno = 0;
      limit.lim.max_rfer = strtoull(fields[2], &end, 10);
      limit.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
      int fd = -1, rc = -1;
      const char *what = "";
      if (errno || end == fields[2] || *end) {
        errno = EINVAL;
        what = "the limit is not a number of bytes";
      } else if ((fd = open(fields[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        what = "opening the subvolume";
      } else {
        struct btrfs_ioctl_ino_lookup_args lookup;
        memset(&lookup, 0, sizeof lookup);
        lookup.objectid = BTRFS_FIRST_FREE_OBJECTID;
        int parent = -1;
        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lookup) != 0) {
          what = "reading its subvolume id (BTRFS_IOC_INO_LOOKUP)";
        } else if ((parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
          what = "opening its parent directory";
        } else {
          limit.qgroupid = lookup.treeid;
          if ((rc = ioctl(parent, BTRFS_IOC_QGROUP_LIMIT, &limit)) != 0) what = "the limit ioctl (BTRFS_IOC_QGROUP_LIMIT)";
        }
        if (parent >= 0) {
          int e = errno;
          close(parent);
          errno = e;
        }
      }
      if (rc != 0)
        printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?", what, strerror(errno));
      else
        printf("ok\n");
      if (fd >= 0) close(fd);
      continue;
    }
    if (count == 2 && strcmp(fields[0], "info") == 0) {
      struct btrfs_ioctl_get_subvol_info_args info;
      memset(&info, 0, sizeof info);
      int fd = open(fields[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      /* Some kernels answer 1 on success (the search's "not found" of a later key): only < 0 fails. */
      if (fd < 0 || ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, &info) < 0)
        printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?",
               fd < 0 ? "opening the subvolume" : "BTRFS_IOC_GET_SUBVOL_INFO", strerror(errno));
      else
        printf("ok %llu %llu %u\n", (unsigned long long)info.treeid, (unsigned long long)info.otime.sec, (unsigned)info.otime.nsec);
      if (fd >= 0) close(fd);
      continue;
    }
    if (count == 2 && strcmp(fields[0], "destroy") == 0) {
      long micros = 0;
      const char *what = "";
      if (destroy(fields[1], &micros, &what) != 0)
        printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?", what, strerror(errno));
      else
        printf("ok %ld\n", micros);
      continue;
    }
    if (count == 3 && strcmp(fields[0], "qgroup") == 0) {
      uint64_t id = 0, rfer = 0, excl = 0;
      const char *what = "";
      int fd = -1, rc = -1;
      if (parse_qgroup(fields[2], &id) != 0) {
        errno = EINVAL;
        what = "the qgroup is not LEVEL/ID";
      } else if ((fd = open(fields[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        what = "opening the path";
      } else {
        rc = qgroup_info(fd, id, &rfer, &excl, &what);
      }
      if (rc != 0)
        printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?", what, strerror(errno));
      else
        printf("ok %llu %llu\n", (unsigned long long)rfer, (unsigned long long)excl);
      if (fd >= 0) close(fd);
      continue;
    }
    if (count != 5 || strcmp(fields[0], "snap") != 0 || (strcmp(fields[1], "0") != 0 && strcmp(fields[1], "1") != 0)) {
      printf("err EINVAL: expected snap<TAB>0|1<TAB>qgroup|-<TAB>source<TAB>dest or excl<TAB>path\n");
      continue;
    }
    long micros = 0;
    const char *what = "";
    if (snapshot(fields[3], fields[4], fields[1][0] == '1', strcmp(fields[2], "-") == 0 ? NULL : fields[2], &micros, &what) != 0)
      printf("err %s: %s: %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?", what, strerror(errno));
    else
      printf("ok %ld\n", micros);
  }
  free(line);
  return 0;
}

static int enable_simple_quota(const char *path) {
  struct btrfs_ioctl_quota_ctl_args args;
  memset(&args, 0, sizeof args);
  args.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "bedrock-snapshot: opening %s: %s\n", path, strerror(errno));
    return 1;
  }
  int rc = ioctl(fd, BTRFS_IOC_QUOTA_CTL, &args);
  int e = errno;
  close(fd);
  if (rc != 0) {
    fprintf(stderr, "bedrock-snapshot: enabling simple quotas (BTRFS_IOC_QUOTA_CTL): %s\n", strerror(e));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) return serve();
  if (argc == 3 && strcmp(argv[1], "--enable-simple-quota") == 0) return enable_simple_quota(argv[2]);
  int timing = 0, readonly = 0, k = 1;
  const char *qgroup = NULL;
  if (k < argc && strcmp(argv[k], "--time") == 0) timing = 1, k++;
  for (; k < argc && argv[k][0] == '-'; k++) {
    if (strcmp(argv[k], "-r") == 0) readonly = 1;
    else if (strcmp(argv[k], "-i") == 0 && k + 1 < argc) qgroup = argv[++k];
    else break;
  }
  if (argc - k != 2) {
    fprintf(stderr, "usage: bedrock-snapshot --serve | --enable-simple-quota PATH | [--time] [-r] [-i LEVEL/ID] SOURCE DEST\n");
    return 2;
  }
  long micros = 0;
  const char *what = "";
  if (snapshot(argv[k], argv[k + 1], readonly, qgroup, &micros, &what) != 0) {
    fprintf(stderr, "bedrock-snapshot: %s: %s\n", what, strerror(errno));
    return 1;
  }
  if (timing) printf("%ld\n", micros);
  return 0;
}
