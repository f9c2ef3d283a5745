/* The pod sandbox's pause process for the test node: sleeps until SIGTERM or SIGINT and reaps
 * any child it inherits (it is PID 1 of the pod). Built static by build.sh. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    signal(SIGCHLD, reap);
    for (;;) pause();
    return 0;
}
