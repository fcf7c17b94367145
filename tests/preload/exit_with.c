/* exit_with.c — exits with the status given (vramguard run must pass it through). */
#include <stdlib.h>

int main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }
