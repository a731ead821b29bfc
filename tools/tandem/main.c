/* tandem: the command-line tool. Uses only the public API. */
#include <tandem/tandem.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--version") == 0) {
        printf("tandem %s\n", TDM_VERSION_STRING);
        return argc < 2 ? 1 : 0;
    }
    fprintf(stderr, "tandem: unknown command '%s'\n", argv[1]);
    return 1;
}
