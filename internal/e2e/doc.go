// Package e2e holds tests that run the kdiag binary's commands side by side
// on the same real sockets and hold what each says to one truth the test
// knows (the time of a FIN it sent itself). It has no code of its own.
package e2e
