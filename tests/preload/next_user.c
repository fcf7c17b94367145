/* next_user.c — prints what dlsym(RTLD_NEXT, "which") asked from the second library
 * finds: 3 is right (the next object after it), 1 would mean the lookup was made
 * relative to someone else (an interposer's dlsym that is not a tail call). */
#include <stdio.h>

int ask_next(void);

int main(void) {
    printf("next after the second library: %d\n", ask_next());
    return 0;
}
