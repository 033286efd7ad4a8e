/* What LegacyBridge uses of Darwin's C library beyond the checker's Darwin.h, written from Apple's
 * headers (sys/poll.h, sys/fcntl.h, sys/event.h): the descriptor loop of SDKLoop(name:) waits with
 * kqueue or poll and makes its wake pipe non-blocking and close-on-exec. .ci/typecheck-darwin appends this to a copy
 * of the checker's header; the checker itself is left as it is. Values are Apple's, not Linux's
 * (O_NONBLOCK differs). */

/* sys/poll.h */
#define POLLIN 0x0001
#define POLLPRI 0x0002
#define POLLOUT 0x0004
#define POLLRDNORM 0x0040
#define POLLWRNORM POLLOUT
#define POLLRDBAND 0x0080
#define POLLWRBAND 0x0100
#define POLLERR 0x0008
#define POLLHUP 0x0010
#define POLLNVAL 0x0020
typedef unsigned int nfds_t;
struct pollfd {
    int fd;
    short events;
    short revents;
};
int poll(struct pollfd *, nfds_t, int);

/* sys/fcntl.h */
#define O_NONBLOCK 0x00000004
#define F_GETFD 1
#define F_SETFD 2
#define F_GETFL 3
#define F_SETFL 4
#define FD_CLOEXEC 1
int fcntl(int, int, ...);

/* sys/event.h: the kqueue backend of the descriptor loop, which carries a 64-bit watch id in
 * kevent64's udata on every Apple architecture. */
#define EVFILT_READ (-1)
#define EVFILT_WRITE (-2)
#define EV_ADD 0x0001
#define EV_DELETE 0x0002
#define EV_ENABLE 0x0004
#define EV_DISABLE 0x0008
#define EV_ONESHOT 0x0010
#define EV_CLEAR 0x0020
#define EV_RECEIPT 0x0040
#define EV_DISPATCH 0x0080
#define EV_EOF 0x8000
#define EV_ERROR 0x4000
struct kevent64_s {
    uint64_t ident;
    int16_t filter;
    uint16_t flags;
    uint32_t fflags;
    int64_t data;
    uint64_t udata;
    uint64_t ext[2];
};
int kqueue(void);
int kevent64(int kq, const struct kevent64_s *changelist, int nchanges, struct kevent64_s *eventlist, int nevents,
             unsigned int flags, const struct timespec *timeout);
