"""The demo shop's orders, read by the `lookup_order` reference tool."""

STATEMENTS = [
    """
    CREATE TABLE demo_orders (
        order_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        carrier TEXT,
        eta DATE,
        items JSONB NOT NULL DEFAULT '[]'::jsonb
    )
    """,
    # The scripted calls say 4417 "shipped yesterday and should arrive on Friday", so its eta
    # is the first Friday after the day the demo database was made (ISODOW: Monday 1 … Sunday 7).
    """
    INSERT INTO demo_orders (order_id, status, carrier, eta, items) VALUES
    ('4417', 'shipped', 'UPS',
        CURRENT_DATE + (mod(11 - EXTRACT(ISODOW FROM CURRENT_DATE)::int, 7) + 1),
        '[{"sku": "KTL-02", "name": "Stovetop kettle", "quantity": 1},
          {"sku": "MUG-11", "name": "Stoneware mug", "quantity": 2}]'::jsonb),
    ('4418', 'processing', NULL, NULL,
        '[{"sku": "TEA-40", "name": "Loose-leaf sampler", "quantity": 1}]'::jsonb),
    ('4420', 'delivered', 'USPS', CURRENT_DATE - 3,
        '[{"sku": "PRS-07", "name": "French press", "quantity": 1}]'::jsonb),
    ('4425', 'cancelled', NULL, NULL,
        '[{"sku": "GRN-03", "name": "Burr grinder", "quantity": 1}]'::jsonb)
    ON CONFLICT (order_id) DO NOTHING
    """,
]
