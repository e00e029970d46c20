package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// args holds `--name value` options (repeatable); a `--name` followed by another option or nothing is a flag.
type args struct {
	command string
	options map[string][]string
}

func parseArgs(argv []string) (*args, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("usage: interop COMMAND [--name value ...]")
	}
	a := &args{command: argv[0], options: map[string][]string{}}
	for i := 1; i < len(argv); i++ {
		if !strings.HasPrefix(argv[i], "--") {
			return nil, fmt.Errorf("unexpected argument %q", argv[i])
		}
		name, value := argv[i][2:], "true"
		if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
			i++
			value = argv[i]
		}
		a.options[name] = append(a.options[name], value)
	}
	return a, nil
}

func (a *args) get(name, fallback string) string {
	values := a.options[name]
	if len(values) == 0 {
		return fallback
	}
	return values[len(values)-1]
}

func (a *args) required(name string) string {
	value := a.get(name, "")
	if value == "" {
		panic(fmt.Sprintf("--%s is required for %s", name, a.command))
	}
	return value
}

func (a *args) integer(name string, fallback int) int {
	value, err := strconv.Atoi(a.get(name, strconv.Itoa(fallback)))
	if err != nil {
		panic(fmt.Sprintf("--%s is not a number", name))
	}
	return value
}

func (a *args) flag(name string) bool {
	return a.get(name, "false") == "true"
}

func (a *args) all(name string) []string {
	return a.options[name]
}

// duration reads a seconds option such as `--timeout 30` or `--linger 0.5`.
func (a *args) duration(name string, fallbackSeconds float64) time.Duration {
	seconds, err := strconv.ParseFloat(a.get(name, strconv.FormatFloat(fallbackSeconds, 'f', -1, 64)), 64)
	if err != nil {
		panic(fmt.Sprintf("--%s is not a number of seconds", name))
	}
	return time.Duration(seconds * float64(time.Second))
}

// credentials: `--access-key AK --secret-key SK` as primitive.Credentials (the client signs every request).
func (a *args) credentials() (primitive.Credentials, bool) {
	ak := a.get("access-key", "")
	if ak == "" {
		return primitive.Credentials{}, false
	}
	return primitive.Credentials{AccessKey: ak, SecretKey: a.required("secret-key")}, true
}
