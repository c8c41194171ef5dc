// Package redistest starts a real redis-server on a free loopback port for tests, with no persistence, and stops it
// when the test ends. Tests can stop and restart it mid-test to prove that the state store fails closed and
// recovers. A missing redis-server fails the test: it is never skipped.
package redistest
