package clients

import (
	"archive/zip"
	"bufio"
	"errors"
	"io"
	"path"
	"strings"
)

// versionProperties is the file in the kafka-clients jar that AppInfoParser
// reads its version from (clients/src/main/resources/kafka/
// kafka-version.properties, written by the build: version=, commitId=).
const versionProperties = "kafka/kafka-version.properties"

// fatJarKafkaClients looks inside a jar for the Kafka client: a nested
// kafka-clients-X.jar (Spring Boot's BOOT-INF/lib/, a war's WEB-INF/lib/,
// any lib/ folder), else the classes of a shaded one, told by its
// kafka/kafka-version.properties. It returns the entry and the version;
// "" when the jar holds neither.
func fatJarKafkaClients(file string) (entry, version string, err error) {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return "", "", err
	}
	defer zr.Close()
	return zipKafkaClients(&zr.Reader)
}

func zipKafkaClients(zr *zip.Reader) (entry, version string, err error) {
	for _, f := range zr.File {
		if v, ok := kafkaClientsJarVersion(path.Base(f.Name)); ok && strings.Contains(f.Name, "/") {
			if v == "" {
				v, _ = nestedJarVersion(f)
			}
			return f.Name, v, nil
		}
	}
	for _, f := range zr.File {
		if f.Name == versionProperties {
			v, err := readVersionProperties(f)
			return f.Name, v, err
		}
	}
	return "", "", nil
}

// nestedJarVersion reads the version of a jar stored inside a jar. Spring
// Boot stores nested jars uncompressed, so it reads as a zip of its own.
func nestedJarVersion(f *zip.File) (string, error) {
	if f.UncompressedSize64 > 64<<20 {
		return "", errors.New("nested jar too large")
	}
	rc, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return "", err
	}
	zr, err := zip.NewReader(strings.NewReader(string(b)), int64(len(b)))
	if err != nil {
		return "", err
	}
	for _, g := range zr.File {
		if g.Name == versionProperties {
			return readVersionProperties(g)
		}
	}
	return "", nil
}

// jarKafkaVersion reads kafka/kafka-version.properties from a kafka-clients
// jar whose name has no version.
func jarKafkaVersion(file string) (string, error) {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return "", err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == versionProperties {
			return readVersionProperties(f)
		}
	}
	return "", errors.New("no " + versionProperties)
}

func readVersionProperties(f *zip.File) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	return parseVersionProperties(io.LimitReader(rc, 64<<10))
}

// parseVersionProperties returns the version= value of
// kafka-version.properties.
func parseVersionProperties(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && strings.TrimSpace(k) == "version" {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no version= line")
}
