
{ "sig" :"abababababababababababababababababababababababababababababababababababababababababababababababababababababababababababababababab",	"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
"alg":"ed25519-sha256","pubkey":"3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29" }