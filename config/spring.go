package config

import (
	"errors"
	"io"
)

// errSpringPending is returned until the Spring front end lands (next commit).
var errSpringPending = errors.New("spring configuration parsing is not implemented yet")

// ParseSpringProperties maps a Spring Boot application.properties onto
// producer configs. Not implemented yet: it returns an error.
func ParseSpringProperties(name string, r io.Reader) (*File, error) {
	return nil, errSpringPending
}

// ParseSpringYAML maps a Spring Boot application.yml onto producer configs.
// Not implemented yet: it returns an error.
func ParseSpringYAML(name string, data []byte) (*File, error) {
	return nil, errSpringPending
}
