/* Up-front checks of output paths (output_path.h). */
#include "output_path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool kr_output_dir_writable(const char *who, const char *what, const char *dir)
{
    struct stat sb;
    if (!dir || !*dir) {
        fprintf(stderr, "%s: %s needs a directory name\n", who, what);
        return false;
    }
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "%s: %s %s cannot be written: it is a file, give a directory\n", who,
                    what, dir);
            return false;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            fprintf(stderr, "%s: %s %s cannot be written: %s\n", who, what, dir, strerror(errno));
            return false;
        }
        return true;
    }
    /* Missing: its parent must take a new directory (a trailing slash is
     * not a level of its own). */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s %s cannot be created: no directory %s (create it first)\n", who,
                what, dir, parent);
        return false;
    }
    if (access(parent, W_OK | X_OK) != 0) {
        fprintf(stderr, "%s: %s %s cannot be created in %s: %s\n", who, what, dir, parent,
                strerror(errno));
        return false;
    }
    return true;
}

bool kr_output_writable(const char *who, const char *option, const char *path)
{
    if (!path || !*path) {
        fprintf(stderr, "%s: %s needs a file name\n", who, option);
        return false;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "%s: %s %s cannot be written: it is a directory, give a file name\n",
                    who, option, path);
            return false;
        }
        if (access(path, W_OK) != 0) {
            fprintf(stderr, "%s: %s %s cannot be written: %s\n", who, option, path,
                    strerror(errno));
            return false;
        }
        return true;
    }
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s %s cannot be written: no directory %s (create it first)\n", who,
                option, path, dir);
        return false;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "%s: %s %s cannot be written: directory %s: %s\n", who, option, path, dir,
                strerror(errno));
        return false;
    }
    return true;
}
