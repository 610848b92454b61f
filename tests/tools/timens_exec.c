/* timens_exec SEC NSEC PROG [ARGS...]: run PROG in a new time namespace whose CLOCK_MONOTONIC
 * (hence CLOCK_MONOTONIC_RAW) and CLOCK_BOOTTIME read SEC s + NSEC ns ahead of the caller's
 * (ns precision; `unshare --monotonic` takes whole seconds only). Needs CAP_SYS_ADMIN; exits 125
 * when the namespace cannot be set up, else with PROG's status. See time_namespaces(7). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child;
static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s SEC NSEC PROG [ARGS...]\n", argv[0]);
    return 2;
  }
  /* The caller stays where it is; its next child is the first process of the new namespace, and
   * offsets can only be written before that child exists. */
  if (unshare(CLONE_NEWTIME) != 0) {
    perror("timens_exec: unshare(CLONE_NEWTIME)");
    return 125;
  }
  char buf[128];
  int n = snprintf(buf, sizeof buf, "monotonic %s %s\nboottime %s %s\n", argv[1], argv[2], argv[1],
                   argv[2]);
  FILE* f = fopen("/proc/self/timens_offsets", "w");
  if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
    fprintf(stderr, "timens_exec: writing /proc/self/timens_offsets: %s\n", strerror(errno));
    return 125;
  }
  child = fork();
  if (child < 0) {
    perror("timens_exec: fork");
    return 125;
  }
  if (child == 0) {
    execvp(argv[3], argv + 3);
    perror("timens_exec: execvp");
    _exit(127);
  }
  signal(SIGTERM, forward);
  signal(SIGINT, forward);
  signal(SIGHUP, forward);
  int st = 0;
  while (waitpid(child, &st, 0) < 0)
    if (errno != EINTR) {
      perror("timens_exec: waitpid");
      return 125;
    }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
