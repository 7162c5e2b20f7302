# ActiveMQ Classic brokers for the recipes (Debian's activemq package): sourced, not run.
#   activemq_install
#       install activemq, postgresql and libpostgresql-jdbc-java when missing (their
#       services not started)
#   activemq_postgres WORK DB...
#       start a PostgreSQL cluster of its own in WORK/pg on a free loopback TCP port (the
#       JDBC driver speaks TCP), durable as shipped (fsync and synchronous_commit on),
#       with databases DB...; sets PG (its bin folder) and PGPORT. Stop it with
#       `su postgres -c "$PG/pg_ctl -D WORK/pg -m fast stop"`.
#   activemq_conf CONF NAME STORE STOMP OPENWIRE [JMX [DBPORT DB]]
#       write CONF/activemq.xml (a broker NAME on loopback: STORE's persistence adapter
#       XML, STOMP and OpenWire connectors, JMX's connector when JMX is a port) and
#       CONF/log4j2.properties. A JDBC store names the data source `postgres-ds`: a
#       pooled PostgreSQL one to 127.0.0.1:DBPORT, database DB, user postgres.
#   activemq_exec BASE CONF HEAP [JVM OPTION...]
#       replace the shell with the broker, its base (data, tmp, lib with PostgreSQL's
#       JDBC driver) in BASE, its configuration in CONF, HEAP as -Xms and -Xmx.

activemq_conf() {
    local conf=$1 name=$2 store=$3 stomp=$4 openwire=$5 jmx=${6:-} dbport=${7:-0} db=${8:-none}
    mkdir -p "$conf"
    cp /etc/activemq/instances-available/main/log4j2.properties "$conf/"
    local management='' use_jmx=false
    if [ -n "$jmx" ]; then
        use_jmx=true
        management="<managementContext><managementContext createConnector=\"true\" connectorHost=\"127.0.0.1\" connectorPort=\"$jmx\"/></managementContext>"
    fi
    cat >"$conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"/>
  <bean id="postgres-ds" class="org.postgresql.ds.PGPoolingDataSource">
    <property name="serverName" value="127.0.0.1"/>
    <property name="portNumber" value="$dbport"/>
    <property name="databaseName" value="$db"/>
    <property name="user" value="postgres"/>
    <property name="dataSourceName" value="activemq-$name"/>
    <property name="maxConnections" value="60"/>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="$use_jmx" brokerName="$name"
          dataDirectory="\${activemq.base}/data">
    $management
    <persistenceAdapter>$store</persistenceAdapter>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:$openwire"/>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:$stomp"/>
    </transportConnectors>
  </broker>
</beans>
XML
}

activemq_exec() {
    local base=$1 conf=$2 heap=$3
    shift 3
    mkdir -p "$base/data" "$base/tmp" "$base/lib"
    ln -sf /usr/share/java/postgresql.jar "$base/lib/postgresql.jar"
    cd "$base" || return 1
    # shellcheck disable=SC2093
    exec java "-Xms$heap" "-Xmx$heap" "$@" -Djava.io.tmpdir="$base/tmp" \
        -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$base" -Dactivemq.conf="$conf" \
        -Dactivemq.data="$base/data" \
        -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$conf/activemq.xml"
}

activemq_install() {
    local need=()
    [ -f /usr/share/activemq/bin/activemq.jar ] || need+=(activemq)
    [ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
    [ ${#need[@]} -gt 0 ] || return 0
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq --no-install-recommends "${need[@]}" ||
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}")) >/dev/null
    rm -f /usr/sbin/policy-rc.d
}

activemq_postgres() {
    local work=$1
    shift
    PG=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    mkdir -p "$work/pg"
    chmod 755 "$work"
    chown postgres "$work/pg"
    PGPORT=$(free_port)
    su postgres -c "$PG/initdb -D $work/pg --auth=trust -U postgres" >"$work/initdb.log" 2>&1
    cat >>"$work/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$work/pg'
max_connections = 200
CONF
    su postgres -c "$PG/pg_ctl -D $work/pg -l $work/pg/server.log -w start" >/dev/null
    local db
    for db in "$@"; do
        su postgres -c "$PG/psql -h 127.0.0.1 -p $PGPORT -U postgres -qc 'CREATE DATABASE $db'"
    done
}
