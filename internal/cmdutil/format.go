package cmdutil

import (
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// FormatFlag registers -o/--output whose allowed values are the keys of a
// writer map, so the help text is always built from what exists.
func FormatFlag(fs *pflag.FlagSet, p *string, def string, formats []string) {
	sorted := append([]string(nil), formats...)
	sort.Strings(sorted)
	fs.StringVarP(p, "output", "o", def, "output format: "+strings.Join(sorted, "|"))
}

// CheckFormat returns a usage error if f is not one of formats.
func CheckFormat(f string, formats []string) error {
	for _, x := range formats {
		if x == f {
			return nil
		}
	}
	sorted := append([]string(nil), formats...)
	sort.Strings(sorted)
	return UsageErrorf("unknown output format %q: want one of %s", f, strings.Join(sorted, ", "))
}

// Keys returns the sorted keys of a format map.
func Keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
