/* leaks.h — memory still live at exit, and memory that grows every step. */
#ifndef VG_LEAKS_H
#define VG_LEAKS_H

/* Report every live allocation, grouped by allocation site, largest first (at exit). */
void vg__leak_report(void);
/* vg_step(): one iteration ended; report sites whose live bytes grew at each of the last
 * `growth_steps` steps (S5: tensors appended to a list in a training loop). */
void vg__growth_step(void);

#endif /* VG_LEAKS_H */
