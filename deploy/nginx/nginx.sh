#!/bin/sh
# nginx on LISTEN (ADDRESS:PORT) in front of the gateways at GATEWAY_1 and GATEWAY_2
# (ADDRESS:PORT each): switchboard.conf with them in place, then nginx in the foreground.
set -eu
: "${LISTEN:?}" "${GATEWAY_1:?}" "${GATEWAY_2:?}"
sed -e "s/LISTEN;/$LISTEN;/" -e "s/GATEWAY_1 /$GATEWAY_1 /" -e "s/GATEWAY_2 /$GATEWAY_2 /" \
    /etc/nginx/switchboard.conf.template > /etc/nginx/conf.d/switchboard.conf
exec nginx -g 'daemon off;'
