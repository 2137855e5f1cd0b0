#include <stdio.h>
int main(void) { puts("kinreg"); return 0; }
