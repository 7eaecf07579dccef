#!/bin/sh
# What roost-demo.service runs at boot, into /root/demo.out.
set -x
deb=/root/roost_0.1.0_amd64.deb
dpkg --purge roost
apt-get install -y $deb 2>&1 | grep -v '^\(Reading\|Building\|Selecting\|Preparing\|Unpacking\|(Reading\|debconf\)'
systemctl is-enabled roost
systemctl show -p ActiveState -p SubState -p StatusText -p MainPID roost
systemctl status roost --no-pager -n 0
ls -ld /var/lib/roost /etc/roost/roost.conf
ps -o user,pid,cmd -C roostd
roost-perf --host 127.0.0.1 --publish-only --count 2000 --persistent --confirm 100 --queue-prefix demo- --keep --quiet 2>&1 | grep -E 'confirms'
roostctl --host 127.0.0.1 list_queues name messages durable; journalctl -u roost --no-pager -n 30 | grep -E "management|Prometheus|listening"
pid1=$(systemctl show -p MainPID --value roost)
sleep 35
systemctl show -p ActiveState -p MainPID -p NRestarts -p WatchdogUSec roost
echo "pid before the 35 s: $pid1"
echo 'log.level = debug' >> /etc/roost/roost.conf
systemctl reload roost
systemctl show -p ActiveState -p StatusText -p MainPID roost
journalctl -u roost --no-pager | grep -i 'reload' | tail -4
systemctl restart roost
systemctl show -p ActiveState -p SubState -p MainPID -p StatusText roost
roostctl --host 127.0.0.1 list_queues name messages durable; journalctl -u roost --no-pager -n 30 | grep -E "management|Prometheus|listening"
roost-perf --host 127.0.0.1 --consume-only --persistent --queue-prefix demo- --quiet --json 2>&1 | tail -c 400
echo
roostctl --host 127.0.0.1 list_queues name messages
systemctl stop roost
systemctl show -p ActiveState -p Result roost
journalctl -u roost --no-pager | grep -E 'systemd|SIGTERM|stopped|Started|Stopping|Stopped' | tail -8
# Port 5672 taken by another process: the install says so, does not start.
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => 5672, Listen => 5, ReuseAddr => 1) or die "$!"; sleep 60' &
holder=$!
sleep 1
dpkg --purge roost
apt-get install -y $deb 2>&1 | grep -v '^\(Reading\|Building\|Selecting\|Preparing\|Unpacking\|(Reading\|debconf\)'
echo "holder pid $holder"
systemctl is-enabled roost
systemctl is-active roost
kill $holder
sleep 1
systemctl start roost
systemctl is-active roost
dpkg --purge roost
getent passwd roost || echo "no roost user after purge"
ls /var/lib/roost 2>&1
systemctl poweroff
