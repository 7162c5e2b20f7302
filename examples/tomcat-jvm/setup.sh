#!/usr/bin/env bash
# Two Tomcat 10 servers on loopback, identical but for their JVM settings, each serving a
# WebDAV share (Tomcat's own WebdavServlet) behind Basic authentication, from Debian's
# packages (installed when missing):
#   small: -Xms64m -Xmx64m   -XX:+UseSerialGC    (a small heap, the single-threaded collector)
#   large: -Xms512m -Xmx512m -XX:+UseParallelGC  (a large heap, the throughput collector)
# Override them with JVM_SMALL and JVM_LARGE. The share's user is `loadmix`, its password
# $LOADMIX_PASSWORD.
#
# Usage: setup.sh WORKDIR   (writes WORKDIR/targets.env: URL_SMALL, URL_LARGE, PID_SMALL,
# PID_LARGE and each share's folder DAV_SMALL, DAV_LARGE; stop.sh WORKDIR stops both).
set -euo pipefail
WORK=${1:?usage: setup.sh WORKDIR}
: "${LOADMIX_PASSWORD:?set LOADMIX_PASSWORD: it becomes the password of the share}"
JVM_SMALL=${JVM_SMALL:--Xms64m -Xmx64m -XX:+UseSerialGC}
JVM_LARGE=${JVM_LARGE:--Xms512m -Xmx512m -XX:+UseParallelGC}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

HOME_DIR=/usr/share/tomcat10
if [ ! -x "$HOME_DIR/bin/catalina.sh" ]; then
    echo "installing tomcat10" >&2
    # Packages must not start system services in a container.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq tomcat10 || (apt-get update -qq && apt-get install -y -qq tomcat10)) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
export JAVA_HOME
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/../../scripts/lib/servers.sh"
wait_http() {
    # Tomcat answers 401 on the share once it has deployed it.
    for _ in $(seq 1 600); do
        python3 -c '
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
except urllib.error.HTTPError as e:
    sys.exit(0 if e.code == 401 else 1)
except Exception:
    sys.exit(1)
sys.exit(1)' "$1" && return 0
        sleep 0.1
    done
    echo "Tomcat did not come up at $1" >&2
    return 1
}
# XML-escape the password for tomcat-users.xml.
PASS_XML=$(python3 -c 'import os, xml.sax.saxutils as s; print(s.quoteattr(os.environ["LOADMIX_PASSWORD"]))')
: >"$WORK/targets.env"
for variant in small large; do
    B="$WORK/$variant"
    mkdir -p "$B/conf" "$B/logs" "$B/temp" "$B/work" "$B/webapps/dav/WEB-INF"
    cp /etc/tomcat10/web.xml /etc/tomcat10/catalina.properties /etc/tomcat10/logging.properties "$B/conf/"
    PORT=$(free_port)
    cat >"$B/conf/server.xml" <<CONF
<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="$PORT" address="127.0.0.1" protocol="HTTP/1.1"
               connectionTimeout="20000" maxKeepAliveRequests="-1" maxThreads="50"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Realm className="org.apache.catalina.realm.MemoryRealm" pathname="conf/tomcat-users.xml"/>
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs"
               prefix="access" suffix=".log" pattern="%m %U %s %b"/>
      </Host>
    </Engine>
  </Service>
</Server>
CONF
    cat >"$B/conf/tomcat-users.xml" <<CONF
<?xml version="1.0" encoding="UTF-8"?>
<tomcat-users xmlns="http://tomcat.apache.org/xml" version="1.0">
  <role rolename="dav"/>
  <user username="loadmix" password=$PASS_XML roles="dav"/>
</tomcat-users>
CONF
    chmod 600 "$B/conf/tomcat-users.xml"
    cat >"$B/webapps/dav/WEB-INF/web.xml" <<'CONF'
<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="5.0">
  <servlet>
    <servlet-name>webdav</servlet-name>
    <servlet-class>org.apache.catalina.servlets.WebdavServlet</servlet-class>
    <init-param><param-name>readonly</param-name><param-value>false</param-value></init-param>
    <init-param><param-name>listings</param-name><param-value>true</param-value></init-param>
  </servlet>
  <servlet-mapping><servlet-name>webdav</servlet-name><url-pattern>/*</url-pattern></servlet-mapping>
  <security-constraint>
    <web-resource-collection><web-resource-name>share</web-resource-name><url-pattern>/*</url-pattern></web-resource-collection>
    <auth-constraint><role-name>dav</role-name></auth-constraint>
  </security-constraint>
  <login-config><auth-method>BASIC</auth-method><realm-name>loadmix share</realm-name></login-config>
  <security-role><role-name>dav</role-name></security-role>
</web-app>
CONF
    opts=JVM_${variant^^}
    CATALINA_HOME=$HOME_DIR CATALINA_BASE=$B CATALINA_PID=$B/tomcat.pid \
        JAVA_OPTS="${!opts} -Djava.awt.headless=true" \
        "$HOME_DIR/bin/catalina.sh" start >"$B/start.log" 2>&1
    wait_http "http://127.0.0.1:$PORT/dav/"
    {
        echo "URL_${variant^^}=http://127.0.0.1:$PORT/dav"
        echo "PID_${variant^^}=$(cat "$B/tomcat.pid")"
        echo "DAV_${variant^^}=$B/webapps/dav"
    } >>"$WORK/targets.env"
done
cat "$WORK/targets.env"
