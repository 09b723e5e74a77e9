// The descriptors the library opens itself (sockets): close-on-exec from the
// moment they exist (SOCK_CLOEXEC, never a later fcntl, so a fork+exec on
// another thread cannot catch one without it), and remembered by owner (a
// world's event loop) so that a forked child can close its copies of a
// world's descriptors without sending on them, shutting them down or waiting
// for anything (docs/faults.md, "fork").
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::fds {

// socket(2) with SOCK_CLOEXEC, remembered as `owner`'s (null: not remembered);
// -1 and errno on failure.
int socket(int family, int type, int protocol, const void* owner);
// accept4(2) with SOCK_CLOEXEC, remembered as `owner`'s; -1 and errno on failure.
int accept(int listener, sockaddr* from, socklen_t* len, const void* owner);
// Remembers `fd`, opened close-on-exec elsewhere (an adopted socket), as `owner`'s.
void track(int fd, const void* owner);
// The whole of a small file (/proc, /sys), opened O_CLOEXEC (std::ifstream's
// open is not); empty if it cannot be read.
std::string readFile(const char* path);
// This process's id, as getpid(2) says, without its system call (about 0.3 µs
// here, and every call checks it): cached, and updated by fork()'s child
// handler. A child made by a raw clone(2) or _Fork(), which skip fork's
// handlers, still sees its parent's id.
pid_t processId();
// In a process forked from the one that opened them: closes (close(2) only,
// never shutdown(2), which would end the parent's connections too) `owner`'s
// descriptors that are still the sockets it opened, and forgets them. A
// number that was closed meanwhile and now names another file is left alone.
void closeInherited(const void* owner);

// Forgets `owner`'s descriptors (it closed them: a world destroyed in the
// process that made it).
void forget(const void* owner);

}  // namespace tether::fds
