#include <string.h>

#include "kreflect.h"
#include "log.h"
#include "test.h"

KR_TEST(log, line_has_prefix_level_and_newline)
{
	char buf[128];
	int n = kr_log_format(buf, sizeof(buf), KR_LOG_WARN, "unable to %s %d", "open", 7);

	check(n == (int)strlen(buf));
	check(strcmp(buf, "kreflect: warn: unable to open 7\n") == 0);
	return 0;
}

KR_TEST(log, long_message_is_cut_not_overrun)
{
	char buf[64], big[400];
	int n;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = kr_log_format(buf, sizeof(buf), KR_LOG_ERROR, "%s", big);
	check(n == (int)sizeof(buf) - 1);
	check(buf[n - 1] == '\n');
	check(memcmp(buf + n - 4, "...", 3) == 0);
	check(strncmp(buf, "kreflect: error: xxx", 20) == 0);
	return 0;
}

KR_TEST(log, out_of_range_levels_are_clamped)
{
	char buf[64];

	kr_log_format(buf, sizeof(buf), 99, "m");
	check(strcmp(buf, "kreflect: trace: m\n") == 0);
	kr_log_format(buf, sizeof(buf), -3, "m");
	check(strcmp(buf, "kreflect: error: m\n") == 0);
	return 0;
}

KR_TEST(log, level_filter)
{
	kr_set_log_level(KR_LOG_WARN);
	check(kr_log_enabled(KR_LOG_ERROR));
	check(kr_log_enabled(KR_LOG_WARN));
	check(!kr_log_enabled(KR_LOG_INFO));
	kr_set_log_level(KR_LOG_INFO);
	check(kr_log_enabled(KR_LOG_INFO));
	return 0;
}

KR_TEST(err, every_code_has_a_name)
{
	int e;

	for (e = KR_OK; e >= KR_ECANCELED; e--)
		check(strcmp(kr_strerror(e), "unknown error") != 0);
	check(strcmp(kr_strerror(-1000), "unknown error") == 0);
	return 0;
}
