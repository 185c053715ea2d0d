/* proctree-init's -h, -l and their words: the help (tini's options, then proctree's) and the license.
 */
#include "init.h"

#include <stdio.h>

/* Returns nothing: the help on stdout, named as the program was invoked. */
void print_help(void)
{
    printf("%s (proctree version %s)\n", R.prog, PROCTREE_VERSION);
    printf("Usage: %s %s\n\n", R.prog, USAGE);
    printf("Runs CMD as a contained tree in the foreground, as a container's init (PID 1) or not: every signal\n"
           "that can be is forwarded to CMD, every orphan reaped, and what CMD leaves running is ended when it\n"
           "exits, in one line on stderr. The exit status is CMD's (128+N for a signal N); 2: bad input, 125:\n"
           "the keeper half was killed, 126: CMD could not be started, 127: CMD was not found.\n\n");
    fputs("Options (tini's):\n"
          "  -h, --help             show this help and exit\n"
          "  --version              show the version and exit\n"
          "  -l                     show the license and exit\n"
          "  -s                     be a subreaper (always so: accepted for tini's command line)\n"
          "  -g, --group            forward every signal to CMD's process group, not only HUP, INT, QUIT,\n"
          "                         TERM, USR1, USR2 and WINCH\n"
          "  -p SIG                 SIG comes when our parent dies, and is forwarded as any signal\n"
          "  -e CODE                return 0 when CMD's exit status is CODE (0 to 255; repeatable)\n"
          "  -w                     a line on stderr for each orphan reaped\n"
          "  -v, --verbose          name each process ended with its pid, and say when none was left;\n"
          "                         -vv: also the containment mode; -vvv: also each orphan reaped (as -w)\n"
          "Options (proctree's):\n"
          "  -q, --quiet            say nothing about what CMD left running (errors only)\n"
          "  --contain MODE         auto (default), cgroup, subreaper or session\n"
          "  --grace S              seconds between the stop signal and SIGKILL at teardown (default 2)\n"
          "  --stop-signal SIG      what ends what CMD leaves running (default TERM)\n\n"
          "Environment (tini's; the options above override it):\n"
          "  TINI_SUBREAPER           as -s\n"
          "  TINI_KILL_PROCESS_GROUP  as -g\n"
          "  TINI_VERBOSITY=N         tini's level: 0 as -q, 1 the default, 2 as -v, 3 as -vv, 4 as -vvv\n",
          stdout);
}

/* Returns nothing: proctree's license (the LICENSE file's words) on stdout. */
void print_license(void)
{
    fputs("MIT License\n"
          "\n"
          "Copyright (c) the proctree developers\n"
          "\n"
          "Permission is hereby granted, free of charge, to any person obtaining a copy\n"
          "of this software and associated documentation files (the \"Software\"), to deal\n"
          "in the Software without restriction, including without limitation the rights\n"
          "to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n"
          "copies of the Software, and to permit persons to whom the Software is\n"
          "furnished to do so, subject to the following conditions:\n"
          "\n"
          "The above copyright notice and this permission notice shall be included in all\n"
          "copies or substantial portions of the Software.\n"
          "\n"
          "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n"
          "IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n"
          "FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE\n"
          "AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER\n"
          "LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,\n"
          "OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE\n"
          "SOFTWARE.\n",
          stdout);
}
