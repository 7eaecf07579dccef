int rawsock_placeholder;
