/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The files a measuring program writes at the end of a run (imago-perf's --hist-csv and
 * --arrivals): checked when the command line is read, so that a run does not end in a file
 * it could never write, and written with every error seen (a full disk, /dev/full, a reader
 * gone), so that data lost is said, never lost silently.
 *
 * Nothing here waits for another process: a FIFO (or a pipe, `--arrivals >(gzip > a.gz)`)
 * is opened without blocking at the end of the run, and one that no process reads then is
 * an error (ENXIO), not a wait. It is not opened when the command line is checked: opening
 * and closing it there would end its reader's input before the run began.
 */
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

namespace imago::app {

/** Open @p path for writing (created 0644 if missing; emptied when @p truncate) without
 *  waiting for a FIFO's reader; writes then block as usual. @return the descriptor, or
 *  -errno (-ENXIO: a FIFO no process reads). */
inline int open_output(const std::string& path, bool truncate) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (truncate ? O_TRUNC : 0),
                        0644);
  if (fd < 0) return -errno;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/** @return why the error @p e (an errno) of opening an output means it cannot be written. */
inline std::string output_error(int e) {
  if (e == ENXIO) return "a FIFO no process reads (start its reader first)";
  return std::strerror(e);
}

/** @return "" when @p path can be written at the end of a run, else why not. Leaves
 *  nothing behind (a file it had to create is removed) and truncates nothing. */
inline std::string check_output(const std::string& path) {
  struct stat st{};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISFIFO(st.st_mode)) return "";  // its reader may come; see the file comment
  const int fd = open_output(path, false);
  if (fd < 0) return output_error(-fd);
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
  return "";
}

/**
 * Write @p path (emptied first) with @p body, then flush and close it, checking each step.
 * @return "" when everything @p body wrote got there, else why not (the first error seen).
 */
inline std::string write_output(const std::string& path, const std::function<void(FILE*)>& body) {
  const int fd = open_output(path, true);
  if (fd < 0) return output_error(-fd);
  FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    const int e = errno;
    ::close(fd);
    return std::strerror(e);
  }
  errno = 0;
  body(f);
  int e = std::ferror(f) ? (errno ? errno : EIO) : 0;  // a buffered write that failed already
  if (std::fflush(f) != 0 && e == 0) e = errno;          // ENOSPC, EPIPE, EIO ...
  if (std::fclose(f) != 0 && e == 0) e = errno;          // NFS and others report here
  return e == 0 ? "" : std::strerror(e);
}

}  // namespace imago::app
