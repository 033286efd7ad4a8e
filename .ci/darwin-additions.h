/* What LegacyBridge uses of Darwin's C library beyond the checker's Darwin.h, written from Apple's
 * headers (sys/poll.h, sys/fcntl.h): the descriptor loop of SDKLoop(name:) waits with poll and
 * makes its wake pipe non-blocking and close-on-exec. .ci/typecheck-darwin appends this to a copy
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
