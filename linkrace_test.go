//go:build race

package fi

const raceBuild = true
