/*
 * Replays fuzz inputs without libFuzzer: each argument is a file or a
 * directory of files, fed one by one to LLVMFuzzerTestOneInput. Built for
 * every target so that `make test` replays tests/corpus/ (crashes found once
 * stay fixed) under the sanitizers and under qemu.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t input[4 << 20];

static int replay_file(const char *path)
{
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		perror(path);
		return -1;
	}
	while (got < sizeof(input) && (n = read(fd, input + got, sizeof(input) - got)) > 0)
		got += (size_t)n;
	close(fd);
	LLVMFuzzerTestOneInput(input, got);
	return 0;
}

int main(int argc, char **argv)
{
	int i, files = 0, errors = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;
		char path[4096];

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			errors++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			errors += replay_file(argv[i]) < 0;
			files++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d) {
			errors++;
			continue;
		}
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			errors += replay_file(path) < 0;
			files++;
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", files);
	printf("%d passed, %d failed\n", errors ? 0 : 1, errors ? 1 : 0);
	return errors ? 1 : 0;
}
